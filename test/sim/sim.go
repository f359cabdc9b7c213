package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// Config describes one simulated run. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Seed       uint64
	Senders    int           // nodes that send commands
	ReadOnly   int           // nodes that only read
	Commands   int           // commands in all, split between senders
	Loss       float64       // per frame, each direction
	Dup        float64       // per frame
	Reorder    float64       // per frame
	MaxDelay   time.Duration // uniform virtual delay per frame
	Partitions bool          // cut nodes off for short spells
	LargeEvery int           // every LargeEvery-th command is fragmented
	MaxVirtual time.Duration // give up (liveness failure) after this much virtual time

	// TooLarge: one command in tooLargeEvery is larger than the
	// sequencers' MaxMessageBytes (simMaxMessage): it must be refused (an
	// InternalRejected record, OnRejected at its node, once) and never
	// sequenced, by every primary of the run.
	TooLarge bool
	// StaleEpochs (with EpochChanges): the last packets of each ended
	// epoch are published again after the change (stale.go).
	StaleEpochs bool
	// Checkpoints (with Cluster): the primary records checkpoints in the
	// failover state as cluster.Member does (checkpoint.go).
	Checkpoints bool
	// RewindStream (with Replayer): a node joins late and rewinds from
	// seq 1 over the replayer's rewind stream, which fails and resumes
	// (rewind.go).
	RewindStream bool

	// SafeLag runs the sequencer as a cluster primary would: stable moves
	// only when a simulated standby group acks, up to StableLag behind
	// what was published (random per run), so safe-mode nodes hold
	// deliveries back and fast-mode nodes run ahead.
	SafeLag bool
	// Restarts: a sender now and then crashes (its unacked commands are
	// lost with it) and comes back as a new incarnation numbering from 1.
	Restarts bool
	// Timers: senders set and cancel centralized timers on sequencer time.
	Timers bool
	// LateJoiner: a read-only node joins mid-run from the live tail.
	LateJoiner bool
	// ClockSteps: the sequencer's wall clock steps back and forward by
	// minutes once each; heartbeats must go on at their rate.
	ClockSteps bool
	// IdleHours: the senders pause for hours of virtual time once, then
	// carry on (counters and token buckets must survive).
	IdleHours bool
	// RingBytes is the sequencer's retransmit ring; 0: enough for the
	// whole run.
	RingBytes int
	// EpochChanges: up to three times a run the primary dies and a new one
	// takes over at a cut between stable and the last seq published
	// (epoch.go).
	EpochChanges bool
	// Cluster runs a group of three sequencer members (cluster.go): two
	// real standby.Agent followers whose acks make stable through a
	// cluster.QuorumAcks, and epoch changes by a simulated election with
	// seal, catch-up and takeover, instead of SafeLag's simulated group
	// and EpochChanges' simulated cut (EpochChanges then turns the
	// primary's failures on).
	Cluster bool
	// PrimaryStore (with Cluster): the primary appends what it publishes
	// to its own store before counting itself in the quorum. Without it
	// (as cluster.Member does today) the primary counts what it published
	// but never wrote: after it crashes, a stable seq may be held by one
	// member only, and a second failure loses it (simrun -seed 20
	// -commands 2000 -without idlehours,primarystore,replayer: "the
	// sealed quorum holds up to 1304, below stable 1319").
	PrimaryStore bool
	// Replayer runs a replayer member (replayer.go) with a small
	// sequencer ring: restarted nodes and a late joiner rewind from seq 1
	// through it, nodes repair from it once the ring evicted, and it
	// crashes and restarts on its store now and then.
	Replayer bool
	// PowerLoss (with Cluster; off by default): the standbys ack what
	// they fsynced (standby.ack durable) instead of what they wrote, and
	// now and then one loses power: it restarts from its vfs.MemFS's
	// CrashClone, only what it fsynced surviving. Only durable acks make
	// that safe: a written ack counts a record a power loss can take, and
	// a member that comes back without it can answer a seal whose
	// quorum then holds no copy of a stable seq (DESIGN.md's durability
	// is "the loss of any minority", a member gone, not one that returns
	// having forgotten). The primary (it counts what it wrote) and the
	// replayer (no quorum counts it; a power loss of it is a lost tail
	// the sequencer's small ring may no longer hold) keep process kills.
	PowerLoss bool
	// HotHot runs a hot-hot pair (hothot.go): two instances of one
	// account answer every sender's command from a stock handler,
	// numbered from the stream, while the active one is killed, paused
	// past the active-timeout or cut off; after every step the pair's
	// sequenced commands must be exactly its handler's sends, each once,
	// from the active instance. Off by default (each seed costs more);
	// make sim runs seeds 1..HOTHOT_SEEDS with it. Traced so far:
	// seed 9's "order 579 answered twice" was the checker (an epoch cut
	// it missed; fixed), the slow seeds were idle hours switching the
	// pair every second (a core stall now restarts ActiveTimeout) and a
	// per-step walk of the orders, and seed 69 a late-joiner check. Seed
	// 12 at 2000 commands ended "no convergence" with 8 orders (seqs
	// 4856..4863) never answered: a real loss in the sequencer's
	// fencing (fixed; TestCore_HotHotFencedIncarnationStaysFenced).
	// Instance 1, cut off, is deactivated; its resent window
	// (incarnation 7) is rejected NotActive, using cmdSeqs 750..757 up;
	// the partner, far behind in the stream, sends nothing and is
	// deactivated in turn; instance 1 is active again before it read of
	// the first switch, and its next cmdSeqs of incarnation 7 (the
	// answers to 4864..) are sequenced. When it then fences and resends
	// 4856..4863 under a new incarnation, their ids are below the
	// account's lastID and they are dropped as the partner's copies
	// (RejectDuplicateID, or acked by the node with the later ids). Ids
	// entered the stream out of order; the dedupe assumes they never
	// do. The fix: the State fences the incarnation at its first
	// NotActive rejection (every later command of it NotActive too,
	// even once active again; a new incarnation clears it), so that the
	// ids only ever enter in order. Seed 143, once slow, runs in 2.6 s
	// with the fix.
	HotHot bool
	// Bridge runs a second site with its own mem network, joined to the
	// origin by a bridge (bridge.go): the real ends' cores on the
	// simulator's clock, a TCP-like channel that is cut and a lossy
	// UDP-like one, and two nodes of the far site, one sending commands
	// back through the bridge; checked after every step. Off by default
	// (a bridge seed costs about 1.7x a plain one); make sim runs it on
	// seeds 1..BRIDGE_SEEDS (26) after the plain seeds. Seed 27 stalls:
	// the far sender keeps 42 commands in flight after everything else
	// converged (not yet traced).
	Bridge bool
	// StoreFaults (`simrun -with store`; off by default): bits flipped in
	// the replayer's segment files while it is down (storefaults.go).
	StoreFaults bool
}

// DefaultConfig is what `make sim` runs: 5% loss, 1% duplication and
// reordering, three senders and a read-only node, 20k commands.
func DefaultConfig() Config {
	return Config{
		Seed:       1,
		Senders:    3,
		ReadOnly:   1,
		Commands:   20000,
		Loss:       0.05,
		Dup:        0.01,
		Reorder:    0.01,
		MaxDelay:   200 * time.Microsecond,
		Partitions: true,
		LargeEvery: 400,
		MaxVirtual: 10 * time.Minute,
		SafeLag:    true,
		Restarts:   true,
		Timers:     true,
		LateJoiner: true,
		ClockSteps: true,
		IdleHours:  true,
		TooLarge:   true,

		EpochChanges: true,
		StaleEpochs:  true,
		Cluster:      true,
		PrimaryStore: true,
		Replayer:     true,
		RewindStream: true,
		Checkpoints:  true,
	}
}

// Result is the outcome of one run.
type Result struct {
	Config    Config
	Steps     int
	Virtual   time.Duration
	Sequenced uint64 // last seq the sequencer published
	Commands  uint64 // commands the senders issued (all acknowledged when Err is nil)
	Sequencer sequencer.Stats
	// ClockSteps counts the sequencer's wall clock steps of minutes back
	// or an hour forward.
	ClockSteps int
	// EpochChanges counts the failovers, Divergences the fast nodes that
	// stopped with ErrDiverged because of them (and were restarted).
	EpochChanges int
	Divergences  int
	// TooLarge counts the commands refused as larger than MaxMessageBytes
	// (Config.TooLarge) in the published stream.
	TooLarge int
	// StaleReplayed counts the packets of ended epochs published again
	// after the change (stale.go).
	StaleReplayed int
	// Checkpoints recorded in the failover state, and refused (a stale
	// epoch's, one not above the last).
	Checkpoints, CheckpointsRefused, CheckpointsDropped int
	// RewindOpens and RewindFails: the rewind-stream joiner's streams
	// opened and failed (rewind.go).
	RewindOpens, RewindFails int
	// The sequencer group (Cluster): members killed, members restarted
	// (as standbys), standby faults (kills, partitions, lag spells).
	Kills, Restarts, StandbyFaults int
	PowerLosses                    int // standbys restarted from what they fsynced (Config.PowerLoss)
	// The replayer (Replayer): records it retransmitted, its crashes.
	ReplayerRepairs     uint64
	ReplayerCrashes     int
	ReplayerPowerLosses int // of its crashes, power losses (Config.PowerLoss)
	// The pair (HotHot): faults of its active instance.
	PairKills, PairPauses, PairPartitions int
	// The bridge (Bridge): TCP channel cuts, UDP partitions, restarts of
	// the TCP channel after a hole outlived GapTimeout, commands carried
	// back, crashes of either end.
	BridgeCuts, BridgeUDPCuts, BridgeGapRestarts, BridgeCommands, BridgeEndCrashes int
	// Store faults (StoreFaults): bits flipped, restarts refused for one.
	StoreFlips, StoreRefusals int
	// ... and in the members' stores: bits flipped, members restarted on
	// an empty directory after their store refused to open.
	MemberFlips, MembersMovedAside int
	Err                            error
}

// Replay is the one command that reruns this seed exactly.
func (r Result) Replay() string {
	s := fmt.Sprintf("go run ./test/sim/cmd/simrun -seed %d -commands %d", r.Config.Seed, r.Config.Commands)
	if off := r.Config.off(); off != "" {
		s += " -without " + off
	}
	if r.Config.PowerLoss {
		s += " -with powerloss"
	}
	if r.Config.HotHot {
		s += " -with hothot"
	}
	if r.Config.Bridge {
		s += " -with bridge"
	}
	if r.Config.StoreFaults {
		s += " -with store"
	}
	return s
}

// scenarios names the optional behaviours of a run, for -without.
func (c *Config) scenarios() map[string]*bool {
	return map[string]*bool{
		"partitions": &c.Partitions, "safelag": &c.SafeLag, "restarts": &c.Restarts, "timers": &c.Timers,
		"latejoiner": &c.LateJoiner, "clocksteps": &c.ClockSteps, "idlehours": &c.IdleHours,
		"epochs": &c.EpochChanges, "cluster": &c.Cluster, "primarystore": &c.PrimaryStore, "replayer": &c.Replayer,
		"toolarge": &c.TooLarge, "stale": &c.StaleEpochs, "rewindstream": &c.RewindStream, "checkpoints": &c.Checkpoints, "powerloss": &c.PowerLoss, "hothot": &c.HotHot, "bridge": &c.Bridge, "store": &c.StoreFaults,
	}
}

// Scenarios lists the names Without takes.
func Scenarios() []string {
	var c Config
	names := make([]string, 0, 12)
	for k := range c.scenarios() {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Without turns off the named scenarios (comma-separated).
func (c *Config) Without(list string) error { return c.set(list, false) }

// With turns on the named scenarios (comma-separated).
func (c *Config) With(list string) error { return c.set(list, true) }

func (c *Config) set(list string, on bool) error {
	if list == "" {
		return nil
	}
	m := c.scenarios()
	for _, name := range strings.Split(list, ",") {
		p, ok := m[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("sim: unknown scenario %q (have %s)", name, strings.Join(Scenarios(), ","))
		}
		*p = on
	}
	return nil
}

// off lists the scenarios turned off, for Replay.
func (c Config) off() string {
	var off []string
	for _, name := range Scenarios() {
		if !*c.scenarios()[name] && name != "powerloss" && name != "hothot" && name != "bridge" && name != "store" { // off by default
			off = append(off, name)
		}
	}
	return strings.Join(off, ",")
}

// ErrInvariant is wrapped by every checker failure.
var ErrInvariant = errors.New("sim: invariant violated")

const (
	tick     = 100 * time.Microsecond
	idleTick = time.Second
)

// heartbeat is the sequencer's HeartbeatInterval; an idle stream's
// heartbeats back off up to maxHeartbeat (MaxHeartbeatInterval), as the
// default config's do (10 ms up to 50 ms).
const (
	heartbeat    = time.Millisecond
	maxHeartbeat = 5 * time.Millisecond
)

// entry is the sequencer's truth about one seq, taken from what it published.
type entry struct {
	account  wire.Account
	instance uint8
	cmdSeq   uint64
	flags    uint8
	epoch    uint32
	time     int64
	internal wire.Internal // the decoded payload of an internal message
}

type world struct {
	cfg        Config
	rng        *rand.Rand
	now        int64
	skew       int64 // the sequencer's wall clock error; it sometimes jumps back
	clockSteps int   // wall clock steps of minutes or hours
	// published and lastPublish: whether and when (virtual time) the
	// sequencer last published.
	published   bool
	lastPublish int64
	net         *mem.Network
	srv         transport.Server
	seq         sequencer.SinkShell
	nodes       []*simNode
	log         []entry
	// standby is a State fed only what the sequencer published: after
	// every step it must equal the sequencer's own (Snapshot bytes).
	standby      *sequencer.State
	checkedSeq   uint64 // standby last compared at this seq
	snapA, snapB []byte
	err          error

	// The simulated standby group (SafeLag): published seqs and when, so
	// that stable trails them by stableLag.
	stableLag time.Duration
	acks      []ack
	dt        int64 // the current step's length (coarse while idle)
	idleUntil int64 // senders pause until then (IdleHours)
	idleTotal int64 // virtual time spent idle: not counted against MaxVirtual
	idleDone  bool

	// Epoch changes (epoch.go): the sequencer's configuration, the
	// current epoch and its first seq, the cuts of the ended epochs, the
	// surviving packets, and how many fast nodes diverged.
	sc          sequencer.Config
	epoch       uint32
	epochStart  uint64
	cuts        []epochCut
	hist        history
	divergences int
	late        bool // LateJoiner: the late node joined

	onServerFrame transport.Handler

	cl           *simCluster  // Config.Cluster: the sequencer group
	rep          *simReplayer // Config.Replayer
	pair         *simPair     // Config.HotHot
	br           *simBridge   // Config.Bridge
	rewindJoined bool         // the rewinding late joiner joined
	stale        stale        // an ended epoch's packets, replayed (stale.go)
	rewinder     *simRewind   // the rewind-stream joiner (rewind.go)
	rewindAt     uint64       // it joins once the stream reaches this seq
}

// Run simulates cfg and returns the outcome; it never panics on a
// protocol failure, it reports it.
func Run(cfg Config) (res Result) {
	d := DefaultConfig()
	if cfg.Senders == 0 {
		cfg.Senders = d.Senders
	}
	if cfg.Commands == 0 {
		cfg.Commands = d.Commands
	}
	if cfg.MaxVirtual == 0 {
		cfg.MaxVirtual = d.MaxVirtual
	}
	if cfg.LargeEvery == 0 {
		cfg.LargeEvery = d.LargeEvery
	}
	res.Config = cfg
	w, err := newWorld(cfg)
	if err != nil {
		res.Err = err
		return res
	}
	if w.cl != nil {
		defer w.cl.close()
	}
	if w.rep != nil {
		defer func() {
			w.rep.close()
			res.ReplayerRepairs, res.ReplayerCrashes, res.ReplayerPowerLosses = w.rep.repairs, w.rep.crashes, w.rep.powerLosses
			res.StoreFlips, res.StoreRefusals = w.rep.flips, w.rep.refusals
		}()
	}
	if w.br != nil {
		defer w.br.close()
	}
	res.Steps, res.Err = w.run()
	if w.br != nil {
		res.BridgeCuts, res.BridgeUDPCuts, res.BridgeGapRestarts, res.BridgeCommands = w.br.cuts, w.br.udpCuts, w.br.gapRestarts, w.br.commandsBack
		res.BridgeEndCrashes = w.br.endCrashes
	}
	if w.pair != nil {
		res.PairKills, res.PairPauses, res.PairPartitions = w.pair.kills, w.pair.pauses, w.pair.partitions
	}
	if w.cl != nil {
		res.Kills, res.Restarts, res.StandbyFaults = w.cl.kills, w.cl.restarts, w.cl.standbyFs
		res.PowerLosses = w.cl.powerLosses
		res.MemberFlips, res.MembersMovedAside = w.cl.storeFlips, w.cl.movedAside
	}
	res.Virtual = time.Duration(w.now)
	res.Sequenced = uint64(len(w.log))
	res.Sequencer = w.seq.Stats()
	res.ClockSteps = w.clockSteps
	res.EpochChanges = len(w.cuts)
	res.Divergences = w.divergences
	res.StaleReplayed = w.stale.sent
	if w.cl != nil && w.cl.ckpt != nil {
		res.Checkpoints, res.CheckpointsRefused, res.CheckpointsDropped = w.cl.ckpt.recorded, w.cl.ckpt.refused, w.cl.ckpt.dropped
	}
	if rw := w.rewinder; rw != nil {
		res.RewindOpens, res.RewindFails = rw.opens, rw.fails
	}
	for i := range w.log {
		if x := &w.log[i].internal; x.Type == wire.InternalRejected && wire.RejectReason(x.Value) == wire.RejectTooLarge {
			res.TooLarge++
		}
	}
	for _, n := range w.nodes {
		res.Commands += n.sent
	}
	return res
}

func newWorld(cfg Config) (*world, error) {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed))}
	w.onServerFrame = w.serverFrame
	net, err := mem.NewNetwork(mem.Config{
		Faults:   fault.Config{Loss: cfg.Loss, Dup: cfg.Dup, Reorder: cfg.Reorder, Seed: cfg.Seed},
		MaxDelay: cfg.MaxDelay,
	})
	if err != nil {
		return nil, err
	}
	w.net = net
	w.srv = net.Server()
	sc := sequencer.DefaultConfig()
	sc.Session = 1
	sc.Epoch = 1
	sc.HeartbeatInterval = heartbeat
	sc.MaxMessageBytes = simMaxMessage
	sc.MaxHeartbeatInterval = maxHeartbeat
	sc.RingBytes = 1 << 16 * sc.MaxPacketBytes
	if cfg.RingBytes > 0 {
		sc.RingBytes = cfg.RingBytes
	}
	// Exercise repair pacing: about what 5% loss needs on average, so
	// bursts (after a partition) are throttled and must still converge.
	sc.RetransmitBytesPerSecond = 2 << 20
	if cfg.HotHot {
		sc.ActiveTimeout = pairActiveTimeout
	}
	if cfg.SafeLag || cfg.Cluster {
		sc.Standalone = false
		w.stableLag = time.Duration(w.rng.IntN(int(3 * time.Millisecond)))
	}
	if cfg.Replayer {
		if cfg.RingBytes == 0 {
			sc.RingBytes = ringBytesWithReplayer
		}
		w.sc = sc
		if w.rep, err = newSimReplayer(w); err != nil {
			return nil, err
		}
	}
	w.seq, err = sequencer.NewSinkShell(sc, w)
	if err != nil {
		return nil, err
	}
	w.sc, w.epoch, w.epochStart = sc, sc.Epoch, sc.FirstSeq
	w.standby = sequencer.NewState(sc.MaxSenders, sc.FirstSeq)
	for i := 0; i < cfg.Senders+cfg.ReadOnly; i++ {
		n, err := newSimNode(w, i, i >= cfg.Senders, false)
		if err != nil {
			return nil, err
		}
		w.nodes = append(w.nodes, n)
	}
	if cfg.HotHot {
		if w.pair, err = newSimPair(w); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster {
		if w.cl, err = newSimCluster(w); err != nil {
			return nil, err
		}
	}
	if cfg.Bridge {
		if w.br, err = newSimBridge(w); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Publish is the sequencer's sink: record the truth, then send.
func (w *world) Publish(pkt []byte) {
	// Liveness whatever the wall clock does: the stream never stays
	// silent for more than the longest heartbeat interval (and one step)
	// of virtual time.
	if w.published && w.now-w.lastPublish > int64(maxHeartbeat)+w.dt {
		w.fail("nothing published for %v (heartbeat interval %v backing off to %v)", time.Duration(w.now-w.lastPublish), heartbeat, maxHeartbeat)
	}
	w.published, w.lastPublish = true, w.now
	w.record(pkt)
	w.remember(pkt)
	_ = w.srv.Publish(pkt)
}

// ack is what the simulated standby group holds at a time.
type ack struct {
	at  int64
	seq uint64
}

// standbys plays the standby group: a seq published at t is acked by a
// quorum at t+stableLag, and only then becomes stable.
func (w *world) standbys() {
	if w.cl != nil {
		w.seq.SetStable(w.cl.stable())
		return
	}
	if !w.cfg.SafeLag {
		return
	}
	if p := w.seq.Published(); len(w.acks) == 0 || w.acks[len(w.acks)-1].seq < p {
		w.acks = append(w.acks, ack{at: w.now + int64(w.stableLag), seq: p})
	}
	i := 0
	for i < len(w.acks) && w.acks[i].at <= w.now {
		w.seq.SetStable(w.acks[i].seq)
		i++
	}
	w.acks = w.acks[i:]
}

// SendTo is the sequencer's unicast sink.
func (w *world) SendTo(to transport.Peer, pkt []byte) { _ = w.srv.SendTo(to, pkt) }

func (w *world) record(pkt []byte) {
	var p wire.Packet
	if err := wire.DecodePacket(pkt, &p); err != nil {
		w.fail("sequencer published a frame that does not decode: %v", err)
		return
	}
	var r wire.Record
	if p.Flags&wire.PacketRetransmit != 0 {
		// A repair published to everyone: it must repeat the truth, but
		// for records an epoch change cut (receivers drop them).
		cut, ended := w.cutOf(p.Epoch)
		for p.Next(&r) {
			if ended && r.Seq > cut {
				continue
			}
			e := w.entryOf(&p, &r)
			if r.Seq > uint64(len(w.log)) || w.log[r.Seq-1] != e {
				w.fail("multicast repair of seq %d differs from what was published", r.Seq)
			}
		}
		return
	}
	for p.Next(&r) {
		e := w.entryOf(&p, &r)
		if n := uint64(len(w.log)); n > 0 && r.Time < w.log[n-1].time {
			w.fail("sequencer time went back at seq %d: %d < %d", r.Seq, r.Time, w.log[n-1].time)
		}
		switch {
		case r.Seq == uint64(len(w.log))+1:
			w.log = append(w.log, e)
			// A message is applied once, at its first record.
			if err := w.standby.Apply(&r); err != nil {
				w.fail("standby cannot apply seq %d: %v", r.Seq, err)
			}
		case r.Seq == uint64(len(w.log)) && r.Fragment() && r.Offset > 0:
			if w.log[r.Seq-1] != e {
				w.fail("fragments of seq %d disagree: %+v vs %+v", r.Seq, w.log[r.Seq-1], e)
			}
		default:
			w.fail("sequencer published seq %d after %d (not dense)", r.Seq, len(w.log))
		}
	}
	w.keep(pkt)
}

// checkStandby asserts that the State applied from the published stream
// equals the sequencer's. It runs after the step's Flush, when every
// record the sequencer made is published, and only when the sequencer's
// State moved (it changes only by applying records).
func (w *world) checkStandby() {
	st := w.seq.State()
	if st.LastSeq() == w.checkedSeq {
		return
	}
	w.checkedSeq = st.LastSeq()
	if w.standby.LastSeq() != st.LastSeq() {
		w.fail("after Flush the sequencer's state is at seq %d, the published stream at %d", st.LastSeq(), w.standby.LastSeq())
		return
	}
	w.snapA = st.AppendSnapshot(w.snapA[:0])
	w.snapB = w.standby.AppendSnapshot(w.snapB[:0])
	if string(w.snapA) != string(w.snapB) {
		w.fail("at seq %d the state applied from the published stream differs from the sequencer's", st.LastSeq())
	}
}

// entryOf is the truth about record r of packet p. A fragment other than
// the first carries no whole internal payload; internal messages are never
// fragmented.
func (w *world) entryOf(p *wire.Packet, r *wire.Record) entry {
	e := entry{account: r.Account, instance: r.Instance, cmdSeq: r.CmdSeq, flags: r.Flags &^ wire.FlagFragment, epoch: p.Epoch, time: r.Time}
	if r.Flags&wire.FlagInternal != 0 {
		if err := wire.DecodeInternal(r.Payload, &e.internal); err != nil {
			w.fail("seq %d: internal payload does not decode: %v", r.Seq, err)
		}
	}
	return e
}

func (w *world) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w at t=%v: %s", ErrInvariant, time.Duration(w.now), fmt.Sprintf(format, args...))
	}
}

func (w *world) serverFrame(frame []byte, from transport.Peer) {
	if w.cl != nil && (w.cl.primary < 0 || !w.cl.observe(frame, from)) {
		return // no primary (frames to it are lost), or an ack lost on the way
	}
	// Malformed frames are the sequencer's to count; the simulator never
	// sends any, so an error here is a bug.
	if err := w.seq.Step(w.seqClock(), frame, from); err != nil {
		w.fail("sequencer rejected a frame: %v", err)
	}
}

// seqClock is the sequencer's reading: virtual time is its monotonic
// clock; its wall clock wanders from it by skew.
func (w *world) seqClock() sequencer.Time {
	return sequencer.Time{Mono: w.now, Wall: w.now + w.skew}
}

func (w *world) run() (int, error) {
	limit := int64(w.cfg.MaxVirtual)
	var cut *simNode
	var healAt int64
	for step := 1; ; step++ {
		dt := int64(tick)
		if w.now < w.idleUntil {
			dt = int64(idleTick) // hours of idle in coarse steps
		}
		w.dt = dt
		next := w.now + dt
		if at, ok := w.net.NextDelivery(); ok && at > w.now && at < next {
			next = at
		}
		if w.rep != nil {
			if at, ok := w.rep.net.NextDelivery(); ok && at > w.now && at < next {
				next = at
			}
		}
		if w.br != nil {
			next = w.br.nextAt(w.now, next)
		}
		w.now = next
		w.net.SetNow(w.now)
		if w.rep != nil {
			w.rep.net.SetNow(w.now)
		}
		if w.br != nil {
			w.br.setNow(w.now)
			w.br.faults()
		}

		// The sequencer's wall clock wanders and sometimes steps back; now
		// and then it steps minutes back or an hour forward. Its timeouts
		// run on virtual (monotonic) time, and its stamps never go back
		// (checked in record).
		if w.rng.IntN(1000) == 0 {
			w.skew -= int64(w.rng.IntN(int(5 * time.Millisecond)))
		}
		if w.cfg.ClockSteps {
			switch w.rng.IntN(20000) {
			case 0:
				w.skew -= int64(1+w.rng.IntN(10)) * int64(time.Minute)
				w.clockSteps++
			case 1:
				w.skew += int64(time.Hour)
				w.clockSteps++
			}
		}
		w.idle()
		w.lateJoin()
		w.joinRewinder()
		w.replayStale()
		if w.cl != nil {
			w.cl.faults()
		} else {
			w.failover()
		}

		if w.cfg.Partitions {
			switch {
			case cut == nil && w.rng.IntN(20000) == 0:
				cut = w.nodes[w.rng.IntN(len(w.nodes))]
				healAt = w.now + int64(time.Millisecond)*int64(1+w.rng.IntN(50))
				w.net.Partition(cut.peer, true)
			case cut != nil && w.now >= healAt:
				w.net.Partition(cut.peer, false)
				cut = nil
			}
		}

		for _, n := range w.nodes {
			n.work()
		}
		if w.pair != nil {
			w.pair.faults()
		}
		if _, err := w.srv.Poll(w.onServerFrame, 0); err != nil {
			return step, err
		}
		if w.cl == nil || w.cl.primary >= 0 {
			w.seq.Flush(w.seqClock())
			w.standbys()
			w.seq.Tick(w.seqClock())
			w.checkStandby()
			if w.cl != nil {
				w.cl.checkStable()
			}
		}
		if w.cl != nil {
			w.cl.work()
			w.cl.checkpoint()
		}
		if w.rep != nil {
			w.rep.work()
		}
		if w.br != nil {
			w.br.work()
		}
		for _, n := range w.nodes {
			n.receive()
		}
		if w.rewinder != nil {
			w.rewinder.work()
		}
		if w.br != nil {
			w.br.receive()
		}
		if w.pair != nil {
			w.pair.receive()
			w.pair.check()
		}
		if w.err != nil {
			return step, w.err
		}
		if cut == nil && w.done() {
			return step, nil
		}
		if debug && step%100000 == 0 {
			fmt.Printf("t=%v %s\n", time.Duration(w.now), w.progress())
		}
		if w.now-w.idleTotal > limit {
			return step, fmt.Errorf("%w: no convergence after %v of virtual time: %s", ErrInvariant, time.Duration(w.now), w.progress())
		}
	}
}

// idle pauses the senders for one to three hours of virtual time, once.
func (w *world) idle() {
	if w.cfg.IdleHours && !w.idleDone && len(w.log) > 100 && w.activeTimers() == 0 && w.rng.IntN(40000) == 0 {
		w.idleDone = true
		d := int64(time.Hour) * int64(1+w.rng.IntN(3))
		w.idleUntil = w.now + d
		w.idleTotal += d
	}
}

func (w *world) activeTimers() int {
	k := 0
	for _, n := range w.senders() {
		k += n.activeTimers()
	}
	return k
}

// senders are the nodes whose commands every node must deliver: the
// origin's and, with the bridge, the far site's.
func (w *world) senders() []*simNode {
	if w.br == nil {
		return w.nodes
	}
	return append(w.nodes[:len(w.nodes):len(w.nodes)], w.br.far...)
}

// lateJoin adds a read-only node that starts from the live tail, once,
// and with a replayer a read-only node that rewinds from seq 1 while the
// stream runs (the ring evicted its start: the replayer serves it).
func (w *world) lateJoin() {
	if w.rep != nil && !w.rewindJoined && len(w.log) >= 2000 && w.rng.IntN(3000) == 0 {
		w.rewindJoined = true
		n, err := newSimNode(w, len(w.nodes), true, false)
		if err != nil {
			w.fail("rewinding late joiner: %v", err)
			return
		}
		w.nodes = append(w.nodes, n)
	}
	if !w.cfg.LateJoiner || w.late || len(w.log) < 1000 || w.rng.IntN(5000) != 0 {
		return
	}
	w.late = true
	n, err := newSimNode(w, len(w.nodes), true, true)
	if err != nil {
		w.fail("late joiner: %v", err)
		return
	}
	w.nodes = append(w.nodes, n)
}

func (w *world) done() bool {
	if !w.rewinder.done() || w.cl != nil && !w.cl.done() || w.rep != nil && !w.rep.done() || w.pair != nil && !w.pair.done() || w.br != nil && !w.br.done() {
		return false
	}
	last := uint64(len(w.log))
	for _, n := range w.nodes {
		if n.lost != nil {
			continue // stopped, as it had to (the ring lost what it lacked)
		}
		if !n.readOnly && (n.sent < uint64(n.target) || n.core.InFlight() > 0) {
			return false
		}
		if n.core.Delivered() < last {
			return false
		}
	}
	// Everything delivered: the last packet was stable and seen by all.
	for _, n := range w.nodes {
		if n.lost != nil {
			continue
		}
		if err := n.finalCheck(); err != nil {
			w.fail("%v", err)
			return false
		}
	}
	if w.cl != nil {
		if err := w.cl.check(); err != nil {
			w.fail("%v", err)
			return false
		}
	}
	if w.rep != nil {
		if err := w.rep.check(); err != nil {
			w.fail("%v", err)
			return false
		}
	}
	if w.br != nil {
		if err := w.br.check(); err != nil {
			w.fail("%v", err)
			return false
		}
	}
	return true
}

func (w *world) progress() string {
	s := fmt.Sprintf("sequenced=%d", len(w.log))
	for _, n := range w.nodes {
		s += fmt.Sprintf(" %s{sent=%d/%d inflight=%d delivered=%d err=%v}", n.name, n.sent, n.target, n.core.InFlight(), n.core.Delivered(), n.core.Err())
	}
	if w.cl != nil {
		s += fmt.Sprintf(" group(done=%v) %s", w.cl.done(), w.cl.progress())
	}
	if w.rep != nil {
		s += fmt.Sprintf(" replayer(done=%v)", w.rep.done())
	}
	if w.pair != nil {
		s += " " + w.pair.progress()
	}
	if w.br != nil {
		s += " " + w.br.progress()
	}
	return s
}
