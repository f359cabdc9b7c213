package page

// Status is the deployment as the page shows it: what a Source gathered,
// with the rates, lags and election history the Handler's History adds.
// Its JSON is what GET /status.json and every server-sent event carry.
type Status struct {
	Source    string      `json:"source"` // who serves the page ("member 2", "admin node")
	AtNS      int64       `json:"at_ns"`  // wall clock of the gathering
	Session   uint64      `json:"session"`
	Epoch     uint64      `json:"epoch"`
	Primary   uint64      `json:"primary"` // 0: none known
	Stable    uint64      `json:"stable"`
	Published uint64      `json:"published"`
	Rates     Rates       `json:"rates"`
	Members   []Member    `json:"members"`
	Receivers []Receiver  `json:"receivers"`
	Replayers []Replayer  `json:"replayers"`
	Pairs     []Pair      `json:"pairs"`
	Elections []Election  `json:"elections"`
	Errors    []string    `json:"errors,omitempty"` // what could not be read, for the operator
	Unhealthy bool        `json:"unhealthy"`        // no primary, or a member unreachable
	Extra     []KeyValues `json:"extra,omitempty"`
}

// Member is one sequencer group member as its admin endpoint answered.
type Member struct {
	ID         uint64 `json:"id"`
	Role       string `json:"role"` // primary | standby | ... | unreachable
	RaftState  string `json:"raft_state"`
	AdminAddr  string `json:"admin_addr"`
	Term       uint64 `json:"term"`
	Epoch      uint64 `json:"epoch"`
	Contiguous uint64 `json:"contiguous"`
	Error      string `json:"error,omitempty"`
}

// Receiver is one follower of the stream and how far it is behind stable.
type Receiver struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind"` // standby | replayer | node
	Held       uint64  `json:"held"`
	LagSeqs    uint64  `json:"lag_seqs"`
	LagSeconds float64 `json:"lag_seconds"` // LagSeqs at the current stable rate (0 when idle)
}

// Replayer is one replayer gossip shows, with the range it holds.
type Replayer struct {
	Name       string `json:"name"`
	Tier       uint8  `json:"tier"`
	Session    uint64 `json:"session"`
	Lowest     uint64 `json:"lowest"`
	Highest    uint64 `json:"highest"`
	RewindAddr string `json:"rewind_addr,omitempty"`
	NAKAddr    string `json:"nak_addr,omitempty"`
	Load       uint32 `json:"load"`
}

// Pair is a hot-hot account: its instances and the active one.
type Pair struct {
	Account   string   `json:"account"`
	Active    uint64   `json:"active"`
	Instances []uint64 `json:"instances"`
}

// Election is one epoch change a member led, with its durations.
type Election struct {
	Epoch      uint64 `json:"epoch"`
	Primary    uint64 `json:"primary"`
	Cut        uint64 `json:"cut"`
	LeaderAtNS int64  `json:"leader_at_ns"`
	SealUS     int64  `json:"seal_us"`
	StartedUS  int64  `json:"started_us"` // leader to the epoch's first record
}

// Rates are per second, measured between two gatherings.
type Rates struct {
	StablePerSec    float64 `json:"stable_per_sec"`
	PublishedPerSec float64 `json:"published_per_sec"`
}

// KeyValues is a titled table of other facts a Source wants shown
// (gossip members of the admin node, for one).
type KeyValues struct {
	Title string     `json:"title"`
	Rows  [][]string `json:"rows"`
}
