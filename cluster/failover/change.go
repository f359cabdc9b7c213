package failover

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/seqd/seqd/fsm"
)

// Config is what one leadership's epoch changes need to know. Times are
// in nanoseconds of the shell's monotonic clock.
type Config struct {
	// Self is this member's id (a voter of the failover state).
	Self uint64
	// Bootstrap are the members a new cluster records before epoch 1
	// (voters unless said otherwise); none for a member that joined.
	Bootstrap []fsm.Member
	// SealTimeoutNS bounds the seal round: without a quorum of answers
	// by then the attempt fails.
	SealTimeoutNS int64
	// GraceNS is how long the others may still answer once a quorum
	// did: a higher cut drops fewer records, and a live member left out
	// would have to drop the records above the cut it holds.
	GraceNS int64
	// RetryNS is the wait after a failed attempt (a heartbeat).
	RetryNS int64
	// MaxFailures failed attempts in a row make the core ask the shell
	// to hand the leadership to another member (Ready.StepAside).
	MaxFailures int
}

// DefaultConfig is the LAN profile's: a 500 ms seal, 5 ms of grace, a
// retry after a 300 ms heartbeat, stepping aside after 3 failures.
func DefaultConfig() Config {
	return Config{
		SealTimeoutNS: int64(500 * time.Millisecond),
		GraceNS:       int64(5 * time.Millisecond),
		RetryNS:       int64(300 * time.Millisecond),
		MaxFailures:   3,
	}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Self == 0:
		return fmt.Errorf("%w: Self 0 (want a member id >= 1)", ErrConfig)
	case c.SealTimeoutNS <= 0:
		return fmt.Errorf("%w: SealTimeoutNS %d (want > 0)", ErrConfig, c.SealTimeoutNS)
	case c.GraceNS < 0 || c.GraceNS > c.SealTimeoutNS:
		return fmt.Errorf("%w: GraceNS %d (want 0..SealTimeoutNS)", ErrConfig, c.GraceNS)
	case c.RetryNS < 0:
		return fmt.Errorf("%w: RetryNS %d (want >= 0)", ErrConfig, c.RetryNS)
	case c.MaxFailures < 1:
		return fmt.Errorf("%w: MaxFailures %d (want >= 1)", ErrConfig, c.MaxFailures)
	}
	return nil
}

// Phase is where the current attempt stands.
type Phase uint8

// Phases, in the order an attempt runs them.
const (
	PhaseBarrier    Phase = iota + 1 // waiting for every committed entry (Ready.Barrier)
	PhaseProposing                   // a bootstrap member or the session being committed
	PhaseRecordSeal                  // the seal being made durable (Ready.RecordSeal)
	PhaseSealing                     // seals sent, answers arriving
	PhaseDropping                    // checkpoints above the cut being dropped (fsm.DropCheckpoints)
	PhaseFetching                    // catching up to the cut (Ready.Fetch)
	PhaseTakeover                    // the standby handing over (Ready.TakeOver)
	PhaseCommitting                  // BeginEpoch proposed
	PhaseRetry                       // an attempt failed; the next one at RetryNS
	PhaseDone                        // primary (Ready.Start was given)
)

func (p Phase) String() string {
	switch p {
	case PhaseBarrier:
		return "barrier"
	case PhaseProposing:
		return "proposing"
	case PhaseRecordSeal:
		return "record-seal"
	case PhaseSealing:
		return "sealing"
	case PhaseDropping:
		return "dropping"
	case PhaseFetching:
		return "fetching"
	case PhaseTakeover:
		return "takeover"
	case PhaseCommitting:
		return "committing"
	case PhaseRetry:
		return "retry"
	case PhaseDone:
		return "done"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Msg is an input to Step: Committed, Rejected, SealRecorded, SealReply,
// Fetched, TookOver.
type Msg interface{ msg() }

// Committed answers Ready.Barrier or Ready.Propose: the failover state
// right after it.
type Committed struct{ State *fsm.State }

// Rejected answers Ready.Propose, Ready.Barrier or Ready.RecordSeal that failed: Refused,
// the FSM applied and refused the command (the state it was built on was
// stale); otherwise Raft failed (a timeout: the entry may still commit).
type Rejected struct {
	Err     error
	Refused bool
}

// SealRecorded answers Ready.RecordSeal: the seal of Epoch is durable (in
// Raft or on every member's disk), so a member that restarts before the
// new epoch commits still acks nothing more of it.
type SealRecorded struct{ Epoch uint64 }

// SealReply is a member's answer to a seal (Err set: it refused, or it
// could not be reached).
type SealReply struct {
	From  uint64
	Epoch uint64 // the epoch it sealed
	// Contiguous is the highest seq its store holds with no gap; for the
	// sealed epoch's own primary, what it wrote (never what it only
	// published: it counted toward stable only what it wrote).
	Contiguous uint64
	// HeldEpoch is the epoch of the record at Contiguous (0: none or
	// unknown): capStale.
	HeldEpoch uint64
	// LastStamp is the newest sequencer time the member saw (records and
	// heartbeats): the new epoch's clock floor.
	LastStamp int64
	Err       error
}

// Fetched answers Ready.Fetch: this member now holds 1..Held.
type Fetched struct {
	Held uint64
	Err  error
}

// TookOver answers Ready.TakeOver: the standby stopped and its State and
// store became the new primary's (Err: it could not).
type TookOver struct{ Err error }

func (Committed) msg()    {}
func (Rejected) msg()     {}
func (SealRecorded) msg() {}
func (SealReply) msg()    {}
func (Fetched) msg()      {}
func (TookOver) msg()     {}

// Seal asks member To to seal Epoch (this member too: the shell answers
// its own from its standby).
type Seal struct {
	To    fsm.Member
	Epoch uint64
}

// Fetch asks the shell to bring this member's store up to Cut from Peers
// (best first: the highest answers; never a member whose answer was
// capped, whose tail is cut records).
type Fetch struct {
	Cut   uint64
	Peers []fsm.Member
}

// TakeOver asks the shell to stop the standby and take its State at Cut
// and its store, ready to sequence Epoch: a member that cannot take over
// burns no epoch.
type TakeOver struct {
	Epoch uint64
	Cut   uint64
	// StartTime is the clock floor known so far (Start.StartTime): the
	// last checkpoint's time and every counted seal answer's LastStamp.
	StartTime int64
}

// Start: this member is the primary of Epoch from FirstSeq, with a clock
// no earlier than StartTime; Voters are the epoch's (whose acks count).
type Start struct {
	Session   uint64
	Epoch     uint64
	FirstSeq  uint64
	StartTime int64
	Voters    []fsm.Member
}

// Ready is what the shell must do next, in this order: Barrier or
// Propose (one Raft operation at a time), RecordSeal, Seal, Fetch,
// TakeOver, Start; StepAside and Failed may come with any. The shell
// answers each with a Msg.
type Ready struct {
	Barrier    bool
	Propose    fsm.Command
	RecordSeal uint64 // epoch to make durably sealed (0: none)
	Seal       []Seal
	Fetch      *Fetch
	TakeOver   *TakeOver
	Start      *Start
	// StepAside: MaxFailures attempts failed in a row; hand the Raft
	// leadership to another member (the core retries if this one stays
	// leader).
	StepAside bool
	// Failed is why the last attempt failed (log it once).
	Failed error
}

// Empty says whether rd asks for nothing.
func (rd Ready) Empty() bool {
	return !rd.Barrier && rd.Propose == nil && rd.RecordSeal == 0 && rd.Seal == nil && rd.Fetch == nil &&
		rd.TakeOver == nil && rd.Start == nil && !rd.StepAside && rd.Failed == nil
}

// Stats counts the answers the core set aside, for status and tests.
type Stats struct {
	Attempts     int
	StaleReplies int // a seal answer of another epoch, or of no attempt
	Strangers    int // an answer from a member that is not a voter
	Capped       int // answers capped at their epoch's cut (capStale)
	// Dropped counts the DropCheckpoints proposed: a checkpoint above
	// every answer (issues 14 and 16).
	Dropped int
}

// answer is one counted seal answer.
type answer struct {
	m     fsm.Member
	c     uint64 // capped
	stale bool   // capped: no fetch source
	stamp int64
}

// Change is the epoch-change core of one Raft leadership: from becoming
// leader to starting as primary, with the retries between. It is not safe
// for concurrent use; the shell calls New, then Step and Tick as inputs
// arrive, reading Ready after each.
type Change struct {
	cfg   Config
	st    *fsm.State
	now   int64
	phase Phase
	rd    Ready
	stats Stats

	barrier  bool // the next attempt reads through a barrier
	failures int
	retryAt  int64

	// The attempt's seal.
	epoch      uint64 // the sealed epoch (the state's current)
	voters     []fsm.Member
	need       int
	answers    []answer
	refusals   []error
	refusedIDs []uint64
	deadline   int64
	quorate    bool // a quorum answered; the rest have until graceAt
	graceAt    int64
	cut        uint64
	stamp      int64
}

// New starts the first attempt on st, the failover state as this member
// applied it (no barrier: every proposal is a compare-and-set the FSM
// checks, and a rejection is retried through a barrier).
func New(cfg Config, st *fsm.State, now int64) (*Change, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil {
		st = fsm.Initial()
	}
	c := &Change{cfg: cfg, st: st, now: now}
	c.begin()
	return c, nil
}

// Phase is where the current attempt stands.
func (c *Change) Phase() Phase { return c.phase }

// Stats returns the counters.
func (c *Change) Stats() Stats { return c.stats }

// Cut is the cut of the sealed epoch once the seal is decided (0 before).
func (c *Change) Cut() uint64 { return c.cut }

// Need is how many seal answers must count for the current attempt.
func (c *Change) Need() int { return c.need }

// Ready returns what to do next and forgets it.
func (c *Change) Ready() Ready {
	rd := c.rd
	c.rd = Ready{}
	return rd
}

// Step takes one input at now.
func (c *Change) Step(now int64, m Msg) {
	c.now = max(c.now, now)
	switch m := m.(type) {
	case Committed:
		c.committed(m.State)
	case Rejected:
		c.rejected(m)
	case SealRecorded:
		if c.phase == PhaseRecordSeal && m.Epoch == c.epoch {
			c.sendSeals()
		}
	case SealReply:
		c.reply(m)
	case Fetched:
		if c.phase != PhaseFetching {
			return
		}
		switch {
		case m.Err != nil:
			c.fail(fmt.Errorf("catch up to %d: %w", c.cut, m.Err))
		case m.Held < c.cut:
			c.fail(fmt.Errorf("%w: holds %d, cut %d", ErrBehindCut, m.Held, c.cut))
		default:
			c.takeOver()
		}
	case TookOver:
		if c.phase != PhaseTakeover {
			return
		}
		if m.Err != nil {
			c.fail(fmt.Errorf("take over at %d: %w", c.cut, m.Err))
			return
		}
		c.phase = PhaseCommitting
		c.rd.Propose = fsm.BeginEpoch{Epoch: c.st.Epoch() + 1, Primary: c.cfg.Self, PrevCut: c.cut}
	}
}

// Tick advances time: the seal's timeout and grace, the retry.
func (c *Change) Tick(now int64) {
	c.now = max(c.now, now)
	switch c.phase {
	case PhaseSealing:
		switch {
		case c.quorate && c.now >= c.graceAt:
			c.sealed()
		case c.now >= c.deadline && len(c.answers) >= c.need:
			c.sealed()
		case c.now >= c.deadline:
			c.fail(c.noQuorum())
		}
	case PhaseRetry:
		if c.now >= c.retryAt {
			c.begin()
		}
	}
}

// NextDue is when Tick has work next (0: none; only inputs move it).
func (c *Change) NextDue() int64 {
	switch c.phase {
	case PhaseSealing:
		if c.quorate {
			return min(c.graceAt, c.deadline)
		}
		return c.deadline
	case PhaseRetry:
		return c.retryAt
	}
	return 0
}

// begin starts an attempt: through a barrier after a failure, else on
// the state at hand.
func (c *Change) begin() {
	c.stats.Attempts++
	c.answers, c.refusals, c.refusedIDs, c.voters = c.answers[:0], c.refusals[:0], c.refusedIDs[:0], nil
	c.quorate, c.graceAt, c.cut, c.stamp, c.need, c.epoch = false, 0, 0, 0, 0, 0
	if c.barrier {
		c.phase = PhaseBarrier
		c.rd.Barrier = true
		return
	}
	c.decide()
}

// decide takes the next step the state calls for: record the bootstrap
// members still missing, a session, then seal the current epoch (or, if
// it has no primary, start at its start: nothing was sequenced).
func (c *Change) decide() {
	st := c.st
	if m, ok := c.bootstrapMissing(); ok {
		c.phase = PhaseProposing
		c.rd.Propose = fsm.AddMember{Member: m}
		return
	}
	if st.Session() == 0 {
		c.phase = PhaseProposing
		c.rd.Propose = fsm.NewSession{Prev: 0}
		return
	}
	if st.Epoch()+1 > math.MaxUint32 {
		c.fail(fmt.Errorf("%w: epoch %d", ErrEpochOverflow, st.Epoch()+1))
		return
	}
	c.stamp = checkpointStamp(st)
	if st.Primary() == 0 {
		c.cut = st.EpochStart() - 1
		c.takeOver()
		return
	}
	c.epoch = st.Epoch()
	for _, m := range st.Members() {
		if m.Role == fsm.Voter {
			c.voters = append(c.voters, m)
		}
	}
	if len(c.voters) == 0 {
		c.fail(fmt.Errorf("%w: epoch %d", ErrNoVoters, c.epoch))
		return
	}
	c.need = SealQuorum(len(c.voters))
	// The seal is made durable before any member is asked: a member
	// restarted between its answer and the commit must not ack the
	// sealed epoch again (issue 14 item 7).
	c.phase = PhaseRecordSeal
	c.rd.RecordSeal = c.epoch
}

// SealQuorum is how many of n voters' seal answers must count: the
// fewest that intersect every majority (n - n/2: 2 of 3, 2 of 4, 3 of
// 5). Every seq stable in the sealed epoch was held by a majority, so
// such a set holds it; and the unsealed rest (n/2 at most) is no majority,
// so nothing more of the epoch becomes stable.
func SealQuorum(n int) int { return n - n/2 }

func (c *Change) sendSeals() {
	c.phase = PhaseSealing
	c.deadline = c.now + c.cfg.SealTimeoutNS
	c.rd.Seal = make([]Seal, 0, len(c.voters))
	for _, m := range c.voters {
		c.rd.Seal = append(c.rd.Seal, Seal{To: m, Epoch: c.epoch})
	}
}

func (c *Change) reply(r SealReply) {
	if c.phase != PhaseSealing || r.Epoch != c.epoch {
		// An answer to an earlier attempt's seal of an older epoch (or
		// to no seal at all): its acks are of another epoch and never
		// count.
		c.stats.StaleReplies++
		return
	}
	i := slices.IndexFunc(c.voters, func(m fsm.Member) bool { return m.ID == r.From })
	if i < 0 {
		c.stats.Strangers++
		return
	}
	if r.Err != nil {
		if !c.refused(r.From) {
			c.refusedIDs = append(c.refusedIDs, r.From)
			c.refusals = append(c.refusals, fmt.Errorf("member %d: %w", r.From, r.Err))
		}
	} else {
		cc, stale := capStale(c.st, r.Contiguous, r.HeldEpoch)
		if stale {
			c.stats.Capped++
		}
		a := answer{m: c.voters[i], c: cc, stale: stale, stamp: r.LastStamp}
		if j := slices.IndexFunc(c.answers, func(a answer) bool { return a.m.ID == r.From }); j >= 0 {
			// A second answer (a retried request): seals are final, so
			// the member holds at least the larger.
			if cc > c.answers[j].c {
				c.answers[j] = a
			}
		} else {
			c.answers = append(c.answers, a)
			if len(c.answers) == c.need {
				c.quorate, c.graceAt = true, c.now+c.cfg.GraceNS
			}
		}
	}
	if c.answered() == len(c.voters) {
		if len(c.answers) >= c.need {
			c.sealed()
		} else {
			c.fail(c.noQuorum())
		}
		return
	}
	if c.quorate && c.now >= c.graceAt {
		c.sealed()
	}
}

// answered is how many voters answered (refusals included), each once.
func (c *Change) answered() int {
	n := len(c.answers)
	for _, m := range c.voters {
		if !slices.ContainsFunc(c.answers, func(a answer) bool { return a.m.ID == m.ID }) && c.refused(m.ID) {
			n++
		}
	}
	return n
}

func (c *Change) refused(id uint64) bool { return slices.Contains(c.refusedIDs, id) }

func (c *Change) noQuorum() error {
	err := fmt.Errorf("%w: epoch %d: %d of %d voters answered, need %d", ErrNoQuorum, c.epoch, len(c.answers), len(c.voters), c.need)
	if len(c.refusals) == 0 {
		return err
	}
	return fmt.Errorf("%w: %w", err, errors.Join(c.refusals...))
}

// sealed decides the cut: the MAXIMUM of the counted answers (each
// answer holds everything up to it, and one of the quorum holds every
// stable seq), never below the epoch's start - 1.
func (c *Change) sealed() {
	cut := c.st.EpochStart() - 1
	for _, a := range c.answers {
		cut = max(cut, a.c)
		c.stamp = max(c.stamp, a.stamp)
	}
	c.cut = cut
	if cp, ok := c.st.LastCheckpoint(); ok && cp.Seq > cut {
		if c.answered() < len(c.voters) && c.now < c.deadline {
			// A checkpoint above every answer so far: a voter that
			// holds it may still answer. Wait for each one, or the
			// seal's timeout, rather than the grace.
			c.graceAt = c.deadline
			return
		}
		// A quorum of answers meets every quorum, so no quorum held the
		// checkpoint (forged standby acks raised stable, or a power cut
		// took the writes): no cut can reach it, and BeginEpoch refuses a
		// cut below it. Drop it in Raft, or every leader fails forever.
		c.phase = PhaseDropping
		c.stats.Dropped++
		c.rd.Propose = fsm.DropCheckpoints{Epoch: c.epoch, Above: cut}
		return
	}
	c.catchUp()
}

// catchUp fetches what this member lacks up to the cut (or takes over at
// once if it holds it).
func (c *Change) catchUp() {
	cut := c.cut
	self, selfOK := uint64(0), false
	for _, a := range c.answers {
		if a.m.ID == c.cfg.Self && !a.stale {
			self, selfOK = a.c, true
		}
	}
	if selfOK && self >= cut {
		c.takeOver()
		return
	}
	srcs := slices.Clone(c.answers)
	slices.SortStableFunc(srcs, func(a, b answer) int {
		switch {
		case a.c > b.c:
			return -1
		case a.c < b.c:
			return 1
		}
		return 0
	})
	f := &Fetch{Cut: cut}
	for _, a := range srcs {
		if !a.stale && a.m.ID != c.cfg.Self && a.c > self {
			f.Peers = append(f.Peers, a.m)
		}
	}
	c.phase = PhaseFetching
	c.rd.Fetch = f
}

func (c *Change) takeOver() {
	c.phase = PhaseTakeover
	c.rd.TakeOver = &TakeOver{Epoch: c.st.Epoch() + 1, Cut: c.cut, StartTime: c.stamp}
}

func (c *Change) committed(st *fsm.State) {
	switch c.phase {
	case PhaseBarrier, PhaseProposing:
		c.st = st
		c.decide()
	case PhaseDropping:
		if cp, ok := st.LastCheckpoint(); (ok && cp.Seq > c.cut) || st.Epoch() != c.epoch {
			c.fail(fmt.Errorf("%w: checkpoints above %d not dropped, have %v", ErrCommit, c.cut, st))
			return
		}
		c.st = st
		c.catchUp()
	case PhaseCommitting:
		want := c.st.Epoch() + 1
		if st.Epoch() != want || st.Primary() != c.cfg.Self || st.EpochStart() != c.cut+1 {
			c.fail(fmt.Errorf("%w: want epoch %d primary %d from %d, have %v", ErrCommit, want, c.cfg.Self, c.cut+1, st))
			return
		}
		c.st = st
		c.phase = PhaseDone
		var voters []fsm.Member
		for _, m := range st.Members() {
			if m.Role == fsm.Voter {
				voters = append(voters, m)
			}
		}
		c.rd.Start = &Start{Session: st.Session(), Epoch: st.Epoch(), FirstSeq: c.cut + 1, StartTime: c.stamp, Voters: voters}
	}
}

func (c *Change) rejected(m Rejected) {
	switch c.phase {
	case PhaseBarrier, PhaseProposing, PhaseRecordSeal, PhaseDropping, PhaseCommitting:
	default:
		return
	}
	err := m.Err
	if m.Refused && !c.barrier {
		// The state read without a barrier was stale: read every
		// committed entry and try again at once; no failure.
		c.barrier = true
		c.rd.Failed = fmt.Errorf("proposal rejected on a state read without a barrier: %w", err)
		c.begin()
		return
	}
	c.fail(err)
}

// fail ends the attempt: the next reads through a barrier after RetryNS;
// MaxFailures in a row ask the shell to step aside.
func (c *Change) fail(err error) {
	c.barrier = true
	c.failures++
	c.rd.Failed = err
	if c.failures >= c.cfg.MaxFailures {
		c.rd.StepAside = true
		c.failures = 0
	}
	c.phase = PhaseRetry
	c.retryAt = c.now + c.cfg.RetryNS
}

// bootstrapMissing is the first bootstrap member the state does not
// record yet, before its first epoch; none once an epoch began (members
// then change only by membership commands). A leader deposed midway
// leaves the rest to the next.
func (c *Change) bootstrapMissing() (fsm.Member, bool) {
	if c.st.Epoch() != 0 {
		return fsm.Member{}, false
	}
	for _, m := range c.cfg.Bootstrap {
		if _, ok := c.st.Member(m.ID); ok {
			continue
		}
		if m.Role == 0 {
			m.Role = fsm.Voter
		}
		return m, true
	}
	return fsm.Member{}, false
}

// capStale caps a seal answer c whose newest held record is of epoch
// held, older than st's (sealed) epoch, at the cut of held, and says
// whether it did. A member that missed the epoch changes after held
// cannot tell from the stream where held was cut and reports the cut
// records of its tail: counted, they would raise the cut past seqs the
// next epochs gave to other messages. Such a member is no fetch source.
// An answer without held (0) or whose cut is no longer recorded is taken
// as it is.
func capStale(st *fsm.State, c, held uint64) (uint64, bool) {
	if held == 0 || held >= st.Epoch() {
		return c, false
	}
	cut, ok := st.Cut(held)
	if !ok || cut.Session != st.Session() || c <= cut.Last {
		return c, false
	}
	return cut.Last, true
}

// checkpointStamp is the clock floor the failover state gives: the latest
// checkpoint's time (0: none).
func checkpointStamp(st *fsm.State) int64 {
	if cp, ok := st.LastCheckpoint(); ok {
		return cp.UnixNano
	}
	return 0
}

// CheckpointBound is the highest seq a checkpoint may record: the highest
// that a majority of voters hold, by what each said it holds over the
// peer port (held: one entry per voter that answered, the primary's own
// written position among them), never by the stream's acks, which a host
// on the LAN can forge (issues 14 and 16). 0 when fewer than a majority
// answered: no checkpoint.
func CheckpointBound(voters int, held []uint64) uint64 {
	need := voters/2 + 1
	if voters <= 0 || len(held) < need {
		return 0
	}
	s := slices.Clone(held)
	slices.SortFunc(s, func(a, b uint64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	return s[need-1]
}

// CheckSeal is the sealed member's side: it refuses a seal of an epoch its
// failover state has not reached (a forged or confused request would
// otherwise make every later seal fail and the standby never ack again).
// An older epoch's seal is the standby's to refuse (it sealed a later one).
func CheckSeal(st *fsm.State, epoch uint64) error {
	if epoch > st.Epoch() {
		return fmt.Errorf("%w: seal of epoch %d, the failover state is at %d", ErrFutureEpoch, epoch, st.Epoch())
	}
	return nil
}
