package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/agent"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/page"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// Follower is the data path of a member, as the control path uses it: the
// standby that follows, persists and acks the stream (cluster.Standby).
// The Member runs it (Run) while the member is not primary, seals it from
// the peer server's goroutines meanwhile, and stops it before the
// Takeover that makes the member primary: the store it hands over then
// belongs to the new primary's Core. After the primacy ends the Member
// opens a new one (Deps.NewFollower) on the same directory.
type Follower interface {
	// Run follows the stream until ctx ends (then it returns ctx.Err())
	// or it fails.
	Run(ctx context.Context) error
	// Seal stops acking epoch (and every earlier one) and returns the
	// highest contiguous seq held. A seal is final: a later epoch's
	// records are acked again. Safe while Run runs.
	Seal(epoch uint32) (uint64, error)
	// CatchUp fetches what the member lacks up to cut from peers (fetch
	// addresses, best first) and returns once it holds 1..cut. Safe
	// while Run runs.
	CatchUp(ctx context.Context, cut uint64, peers []string) error
	// Takeover returns the stream-derived State at exactly cut and the
	// history store that answers NAKs at or below it; called after Run
	// returned.
	Takeover(cut uint64) (sequencer.Takeover, error)
	// KnowEpoch says where epoch began in the stream (start, its first
	// seq). The Member tells a follower it opens where every epoch of the
	// session began, from the failover state (after a restart, only once
	// that state has caught up with the group: awaitFailoverState), and
	// the running one each later epoch start as the FSM applies it
	// (followers.tell, on Run's goroutine, never Raft's). A standby that
	// missed two or more epoch changes (down or cut off meanwhile) cannot
	// tell from the stream where its own newest epoch was cut, and would
	// keep and report the cut records of its tail; told, it drops them
	// and heals from the missed epoch's start.
	KnowEpoch(epoch uint32, start uint64)
	// HeldEpoch is the epoch of the newest record its seal answer counts
	// (0: none or unknown). The sealing leader caps an answer whose epoch
	// is older than the sealed one at that epoch's cut (cluster/failover).
	HeldEpoch() uint32
	// Contiguous is the highest contiguous seq it holds, for `seqd admin
	// status` (the lag). Safe while Run runs.
	Contiguous() uint64
}

// Acks turns the standbys' acknowledgements into the primary's stable seq
// (cluster.Quorum). Observe and Stable are called on the primary's
// sequencing goroutine only.
type Acks interface {
	// Observe sees every frame the primary receives (standby acks ride
	// in Status frames from the command channel); it must not keep frame.
	Observe(frame []byte, from transport.Peer)
	// Stable is the highest seq held by a quorum of the epoch's members,
	// given that the primary published up to published.
	Stable(published uint64) uint64
	// SetPublished tells the tracker that the primary published every
	// seq up to seq; an ack above it never counts (no standby can hold
	// what was never published). Called before each Observe.
	SetPublished(seq uint64)
	// SetVoters changes whose acks count within the epoch (a member
	// added or removed during it); the tracker keeps what was stable.
	SetVoters(voters []uint64) error
}

// Epoch describes an epoch this member starts as primary; Deps.Acks gets
// it to know whose acks count.
type Epoch struct {
	Session  uint64
	Epoch    uint32
	FirstSeq uint64
	Members  []fsm.Member // the voters of the epoch
	Self     uint64
}

// Deps are the Member's collaborators, each an interface so that tests hand
// in small twins.
type Deps struct {
	// NewFollower opens this member's standby (required): at start, and
	// again each time the member stops being primary.
	NewFollower func() (Follower, error)
	// Stream opens the primary's end of the stream transport when this
	// member becomes primary; the Member closes it when it stops (required).
	Stream func() (transport.Server, error)
	// Acks returns the ack tracker of a new epoch (required).
	Acks func(e Epoch) Acks
	// Clock reads the time (sequencer.SystemClock when nil).
	Clock func() sequencer.Time
	// Raft is what the member's Raft runs on (required): OpenRaft's bolt
	// stores and TCP transport in production, hashicorp/raft's in-memory
	// twins in tests. The Member closes it.
	Raft RaftDeps
}

// Role is what a member does now.
type Role int32

// Roles.
const (
	RoleStandby Role = iota // follows the stream
	RoleSealing             // Raft leader, changing the epoch
	RolePrimary             // Raft leader, sequencing
	RoleStopped             // the node was shut down
)

func (r Role) String() string {
	switch r {
	case RoleStandby:
		return "standby"
	case RoleSealing:
		return "sealing"
	case RolePrimary:
		return "primary"
	case RoleStopped:
		return "stopped"
	}
	return fmt.Sprintf("role(%d)", int32(r))
}

// Member is one sequencer process of the Raft group: it runs hashicorp/raft
// over the failover state (fsm), and is primary while it is the Raft
// leader. See the package comment for the roles and the epoch change.
//
// Concurrency: Run owns the role changes; Status, TransferPrimary,
// AddMember and RemoveMember are safe from any goroutine. The primary
// sequences on a goroutine of its own, which alone touches the Core.
type Member struct {
	cfg   MemberConfig
	deps  Deps
	peers PeerClient // over TLS when cfg.TLS
	log   *slog.Logger
	fsm   *fsm.FSM
	raft  *raft.Raft
	store *raftStores

	admin   *http.Server
	adminLn net.Listener
	// adminClient asks other members' admin endpoints (the status page's
	// pairs) with this member's token and certificate.
	adminClient *ops.Client
	surface     *ops.Surface
	// pageReplayers lists the replayers the status page shows (set by
	// SetPageReplayers once gossip runs; nil: none).
	pageReplayers atomic.Pointer[func() []page.Replayer]

	role atomic.Int32
	// controls carries operator activation requests (activation.go) into
	// the primary's loop.
	controls sequencer.Controls
	// handover is set while a planned transfer stops this primary: the
	// sequencing loop ends and the leader does not start it again.
	handover atomic.Bool
	relead   chan struct{} // a failed handover asks Run to lead again
	fr       *followers
	// applied gets a token from the FSM after each Apply and Restore
	// (fsm.FSM.Notify; it never blocks Raft): Run then tells the running
	// standby the epoch starts it lacks, and a restarted member waits on
	// it until its failover state has caught up (awaitFailoverState).
	applied chan struct{}
	// changed gets a token (never blocking) on each role change and each
	// FSM apply that Run sees: Changed, for a caller that reports them
	// without polling.
	changed chan struct{}
	// primaryWake wakes the primary's loop blocked in Poll (nil while
	// this member does not sequence, or when its stream server cannot be
	// woken): a handover, a membership change, a finished checkpoint
	// proposal. The loop's end (leadership lost, shutdown) wakes it
	// through its context.
	primaryWake atomic.Pointer[wakeRef]

	// Published by the sequencing goroutine for Status and checkpoints.
	curEpoch   atomic.Uint64
	stable     atomic.Uint64
	published  atomic.Uint64
	lastStamp  atomic.Int64
	startedAt  atomic.Int64 // wall ns of the first record of the current epoch
	stoppedAt  atomic.Int64 // wall ns the last primary loop of this member ended
	lastChange atomic.Pointer[ops.Change]
	// seqStats are the counters of the Core of this member's current or
	// last epoch as primary (SequencerStats), copied by its loop.
	seqMu    sync.Mutex
	seqStats sequencer.Stats
	// self is the running primary's own copy (nil while it does not
	// sequence): what it counts toward stable and answers a seal with.
	self atomic.Pointer[primarySelf]
	// acks is the running primary's ack tracker (nil while it does not
	// sequence).
	acks atomic.Pointer[acksRef]

	closeOnce sync.Once
}

// NewMember validates cfg and deps, starts Raft on deps.Raft
// (bootstrapping a new cluster from cfg.Members when its stores are
// empty) and the admin endpoint on cfg.AdminAddr. Call Run to take part
// in the roles. The Member owns deps.Raft from here on, and closes it on
// an error too.
func NewMember(cfg MemberConfig, deps Deps) (*Member, error) {
	fail := func(err error) (*Member, error) {
		if deps.Raft.Close != nil {
			_ = deps.Raft.Close()
		}
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	sc := cfg.Sequencer
	sc.Session, sc.Epoch, sc.FirstSeq, sc.Standalone = 1, 1, 1, false
	if err := sc.Validate(); err != nil {
		return fail(err)
	}
	if deps.NewFollower == nil || deps.Stream == nil || deps.Acks == nil {
		return fail(fmt.Errorf("%w: Deps need NewFollower, Stream and Acks", ErrConfig))
	}
	if err := deps.Raft.validate(); err != nil {
		return fail(err)
	}
	if deps.Clock == nil {
		deps.Clock = sequencer.SystemClock()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	n := &Member{
		cfg:     cfg,
		deps:    deps,
		peers:   peerClientOf(cfg.TLS),
		log:     log.With("member", cfg.ID),
		fsm:     fsm.New(),
		relead:  make(chan struct{}, 1),
		applied: make(chan struct{}, 1),
		changed: make(chan struct{}, 1),
	}
	n.fsm.Notify(n.applied)
	n.fr = newFollowers(n)
	// The status page (ops/page), served beside the REST endpoint.
	n.adminClient = cfg.AdminAuth.Client()
	pg, err := page.New(page.DefaultConfig(), &page.Cluster{Name: fmt.Sprintf("member %d", cfg.ID), Local: n.Status, Client: n.adminClient, Replayers: n.replayersOnPage, Pairs: n.pairsOnPage})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fail(fmt.Errorf("cluster: admin endpoint: %w", err))
	}
	n.adminLn = ln
	n.raft, n.store, err = startRaft(cfg, n.fsm, deps.Raft)
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.surface = ops.MemberSurface(n, cfg.AdminAuth)
	mux := http.NewServeMux()
	mux.Handle("/", n.surface.Handler())
	// The status page shows what /v1/status does: the same guard.
	mux.Handle("/ui/", n.surface.Authed(http.StripPrefix("/ui", pg)))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	n.admin = ops.NewHTTPServer(mux)
	go func() {
		// Serve returns when the endpoint is closed (Close).
		_ = n.admin.Serve(cfg.AdminAuth.Listen(ops.NewLimitListener(ln, ops.AdminMaxConns)))
	}()
	return n, nil
}

// Surface is the member's admin surface (its commands, status, health
// and metrics), which the admin endpoint serves over HTTP; a console
// (ops.Surface.ServeConsole) serves the same.
func (n *Member) Surface() *ops.Surface { return n.surface }

// AdminAddr is the address the admin endpoint listens on.
func (n *Member) AdminAddr() string { return n.adminLn.Addr().String() }

// State is the failover state as this member has applied it.
func (n *Member) State() *fsm.State { return n.fsm.State() }

// Role is what this member does now.
func (n *Member) Role() Role { return Role(n.role.Load()) }

// Changed gets a token after the role changes or the failover state
// moves (tokens coalesce: read Role and State after each), so that a
// caller reporting role changes need not poll them.
func (n *Member) Changed() <-chan struct{} { return n.changed }

func (n *Member) setRole(r Role) {
	n.role.Store(int32(r))
	n.signalChanged()
}

func (n *Member) signalChanged() {
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

// acksRef holds the running primary's ack tracker.
type acksRef struct{ a Acks }

// wakeRef holds the primary's stream server, to wake its loop.
type wakeRef struct{ w transport.Waker }

// wakePrimary makes the primary's loop run a turn now, if this member
// sequences; safe from any goroutine.
func (n *Member) wakePrimary() {
	if r := n.primaryWake.Load(); r != nil {
		r.w.Wake()
	}
}

// IsLeader says whether this member is the Raft leader (it may still be
// sealing, not yet sequencing).
func (n *Member) IsLeader() bool { return n.raft.State() == raft.Leader }

func (n *Member) setSequencerStats(s sequencer.Stats) {
	n.seqMu.Lock()
	n.seqStats = s
	n.seqMu.Unlock()
}

// SequencerStats are the counters of the sequencer Core of this member's
// current or last epoch as primary (zero if it never sequenced), as of
// its loop's last copy (every 50 ms while busy). They start again from
// zero in each epoch this member leads. Safe from any goroutine.
func (n *Member) SequencerStats() sequencer.Stats {
	n.seqMu.Lock()
	defer n.seqMu.Unlock()
	return n.seqStats
}

// LastChange is the timing of the last epoch change this member led, or nil.
func (n *Member) LastChange() *ops.Change { return n.lastChange.Load() }

// Run takes part in the roles until ctx ends: primary while this member is
// the Raft leader, standby otherwise. It returns ctx.Err() after stopping
// the primary and Raft (Close is implied).
func (n *Member) Run(ctx context.Context) error {
	defer n.Close()
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	start := func() {
		stop()
		var lctx context.Context
		lctx, cancel = context.WithCancel(ctx)
		done = make(chan struct{})
		go func() {
			defer close(done)
			n.lead(lctx)
		}()
	}
	defer stop()
	defer n.fr.stop()
	// A restarted member's failover state is what Raft restored from its
	// snapshot; its log is applied only once a leader says what is
	// committed. Its standby must know every epoch start before it
	// follows the stream.
	n.awaitFailoverState(ctx)
	if err := n.fr.start(ctx); err != nil {
		return err
	}
	if n.IsLeader() {
		start()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-n.fr.errc:
			return err
		case <-n.applied:
			// On Run's goroutine, not Raft's: the standby's lock may be
			// held while it rebuilds its State.
			n.fr.tell()
			// A primary sees a membership change at once (its loop
			// blocks until its next timed work otherwise).
			n.wakePrimary()
			n.signalChanged()
		case leader := <-n.raft.LeaderCh():
			// Each notification is a transition; a dropped one in between
			// means leadership was lost and won again, so a true always
			// starts over with a new epoch.
			stop()
			n.handover.Store(false)
			// Standby again (or until the lead takes the store over).
			if err := n.fr.start(ctx); err != nil {
				return err
			}
			if leader {
				start()
			}
		case <-n.relead:
			if err := n.fr.start(ctx); err != nil {
				return err
			}
			if n.IsLeader() {
				start()
			}
		}
	}
}

// Close stops the admin endpoint and Raft. Run calls it when it returns.
func (n *Member) Close() error {
	n.closeOnce.Do(func() {
		n.setRole(RoleStopped)
		n.admin.Close()
		n.store.quiet()
		if err := n.raft.Shutdown().Error(); err != nil {
			n.log.Warn("raft shutdown", "err", err)
		}
		n.store.close()
	})
	return nil
}

// errNotLeader ends a lead attempt: this member lost the Raft leadership.
var errNotLeader = errors.New("cluster: lost raft leadership")

// errRejected wraps the fsm's reason for rejecting a proposal.
var errRejected = errors.New("cluster: proposal rejected")

// apply proposes cmd and waits for it to commit, returning the state
// right after it or the reason it was rejected.
func (n *Member) apply(cmd fsm.Command) (*fsm.State, error) {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(b, n.cfg.Timeouts.Seal)
	if err := f.Error(); err != nil {
		return nil, n.raftErr(cmd.Kind().String(), err)
	}
	s, err := fsm.Response(f.Response())
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %w", errRejected, cmd.Kind(), err)
	}
	return s, nil
}

func (n *Member) raftErr(op string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w: %s: %v", errNotLeader, op, err)
	}
	return fmt.Errorf("cluster: %s: %w", op, err)
}

// sequence is the primary's shell: it polls the stream transport, steps
// frames into the core (acks to the tracker first), moves stable to the
// quorum's, flushes and ticks, and stops at once when this member is no
// longer the Raft leader (raft steps down by itself when it has not heard
// from a quorum within the leader lease), when ctx ends or when a handover
// begins. It reads the clock once per batch, like sequencer.Agent.
//
// Idle, it blocks in Poll until its next timed work (the Core's next
// heartbeat or timer, the next checkpoint due) instead of polling: a
// frame ends the wait at once, and whatever must stop or redirect the
// loop from another goroutine wakes it (Waker): ctx ending (Run cancels
// it when raft reports the leadership lost), a handover, a membership
// change. A stream server that cannot be woken is polled every
// maxPrimaryWait, as before.
func (n *Member) sequence(ctx context.Context, core *sequencer.Core, out teeSink, hist sequencer.RetransmitStore, acks Acks, ch *ops.Change, t0 time.Time) error {
	srv := out.srv
	sh := newPrimaryShell(n, core, srv, acks)
	sh.out = out
	sh.self = newPrimarySelf(uint32(ch.Epoch), hist)
	n.self.Store(sh.self)
	defer n.self.Store(nil)
	n.acks.Store(&acksRef{a: acks})
	defer n.acks.Store(nil)
	if w, ok := srv.(transport.Waker); ok {
		sh.wakeable = true
		n.primaryWake.Store(&wakeRef{w: w})
		defer n.primaryWake.Store(nil)
		stopWake := context.AfterFunc(ctx, w.Wake)
		defer stopWake()
	}
	core.Flush(sh.read())
	sh.out.send(core)
	if err := srv.Flush(); errors.Is(err, transport.ErrClosed) {
		return err
	}
	n.startedAt.Store(time.Now().UnixNano())
	ch.StartedUS = time.Since(t0).Microseconds()
	n.lastChange.Store(ch)
	n.curEpoch.Store(ch.Epoch)
	n.setRole(RolePrimary)
	n.log.Info("primary", "epoch", ch.Epoch, "first_seq", ch.Cut+1, "barrier_us", ch.BarrierUS, "seal_us", ch.SealUS, "catchup_us", ch.CatchUpUS,
		"commit_us", ch.CommitUS, "takeover_us", ch.TakeoverUS, "open_us", ch.OpenUS, "started_us", ch.StartedUS)
	defer func() {
		st := core.Stats()
		n.setSequencerStats(st)
		n.stoppedAt.Store(time.Now().UnixNano())
		// The command path's drops say why nodes resent (flow_paused: stable
		// lagged a flow window; out_of_order: frames after a dropped one).
		n.log.Info("primary stopped", "epoch", ch.Epoch, "published", core.Published(), "stable", core.Stable(),
			"commands", st.Commands, "duplicates", st.Duplicates, "flow_paused", st.FlowPaused, "out_of_order", st.OutOfOrder,
			"standby_acks", st.StandbyAcks)
	}()

	ckpt := newCheckpointer(n, ch.Epoch)
	defer ckpt.stop()
	members := n.fsm.State()
	// Between turns: stop at once when the leadership or the epoch ends,
	// propose a checkpoint when due, follow membership changes.
	sh.between = func(t sequencer.Time) error {
		ckpt.maybe(t.Mono)
		sh.due = ckpt.due()
		if st := n.fsm.State(); st != members {
			if !slices.Equal(st.Members(), members.Members()) {
				var ids []uint64
				for _, m := range st.Members() {
					if m.Role == fsm.Voter {
						ids = append(ids, m.ID)
					}
				}
				// A member added or removed during the epoch changes
				// whose acks count.
				if err := acks.SetVoters(ids); err != nil {
					n.log.Warn("quorum voters", "err", err)
				}
			}
			members = st
		}
		return n.stillPrimary(ctx)
	}
	err := n.stillPrimary(ctx)
	if err == nil {
		err = sh.run.Run(ctx, sh)
	}
	if errors.Is(err, errHandingOver) {
		return ctx.Err() // a handover ends the epoch without an error
	}
	return err
}

// errHandingOver stops the primary's loop for a handover (sequence
// returns nil for it).
var errHandingOver = errors.New("cluster: handing over")

// stillPrimary is nil while this member may go on sequencing: ctx lives,
// no handover began and raft still calls it leader.
func (n *Member) stillPrimary(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.handover.Load() {
		return errHandingOver
	}
	if n.raft.State() != raft.Leader {
		return errNotLeader
	}
	if p := n.self.Load(); p != nil && n.fsm.State().Sealed() >= uint64(p.epoch) {
		// A new leader recorded the seal of this epoch: this member is
		// deposed though raft has not said so yet (or, leader again, it
		// must change the epoch: lead retries while it leads).
		return errEpochSealed
	}
	return nil
}

// errEpochSealed stops a primary whose epoch the failover state records
// as sealed by another leader.
var errEpochSealed = errors.New("cluster: this primary's epoch was sealed by a new leader")

// primaryShell is the primary's loop, an agent.Agent run by an
// agent.Runner, apart so that a test can drive it turn by turn: poll the
// stream transport (frames to the ack tracker, then to the core), move
// stable to the quorum's, flush, tick, hand the Core's Ready to the
// server and the store after each of those calls (teeSink), and publish
// the positions for Status and the checkpointer. A turn allocates
// nothing.
type primaryShell struct {
	n       *Member
	core    *sequencer.Core
	srv     transport.Server
	out     teeSink // the Core's Ready to srv (and the store)
	acks    Acks
	clock   func() sequencer.Time
	now     sequencer.Time
	fresh   bool // now was read in this turn
	onFrame transport.Handler
	ackBuf  []sequencer.StandbyAck
	run     *agent.Runner // idling (Config.IdleSpin), yielding, the clock
	// wakeable: the server is a transport.Waker that the Member wakes when
	// the loop must look (sequence); the turn may then block until its
	// next timed work.
	wakeable bool
	// due is the mono ns of the next timed work outside the Core (a
	// checkpoint to propose), 0 when none.
	due int64
	// between, if set, runs at the end of every turn (sequence's
	// checks); its error ends the loop.
	between func(sequencer.Time) error
	// polls counts Polls that were allowed to block (tests: an idle
	// primary must not wake on a fixed short period).
	polls uint64
	// snapAt is the mono ns of the last copy of the Core's counters for
	// SequencerStats (every statsEvery, as sequencer.Agent does).
	snapAt int64
	// self is the primary's own copy as stable counts it.
	self *primarySelf
}

// statsEvery is how often the primary's loop copies its Core's counters
// for SequencerStats (the admin surface's metrics).
const statsEvery = 50 * time.Millisecond

// maxPrimaryWait bounds a turn's Poll when the stream server cannot be
// woken (not a transport.Waker), so that a lost leadership stops
// sequencing within a millisecond of raft noticing it.
const maxPrimaryWait = time.Millisecond

func newPrimaryShell(n *Member, core *sequencer.Core, srv transport.Server, acks Acks) *primaryShell {
	sh := &primaryShell{n: n, core: core, srv: srv, out: teeSink{srv: srv}, acks: acks, clock: n.deps.Clock, ackBuf: make([]sequencer.StandbyAck, 0, 64)}
	sh.onFrame = sh.frame
	cfg := agent.DefaultConfig()
	cfg.Spin, cfg.Clock = max(0, n.cfg.IdleSpin), sh.mono
	r, err := agent.NewRunner(cfg)
	if err != nil {
		panic("cluster: the primary's runner: " + err.Error()) // the config above is valid
	}
	sh.run = r
	return sh
}

// read returns this turn's clock reading, taking it on first use.
func (sh *primaryShell) read() sequencer.Time {
	if !sh.fresh {
		sh.now, sh.fresh = sh.clock(), true
	}
	return sh.now
}

// mono is the runner's clock: this turn's reading.
func (sh *primaryShell) mono() int64 { return sh.read().Mono }

// NextDue is the Core's next timed work (sequencer.IdleWait, at most
// 100 ms) or the next checkpoint due, as of the last turn's clock
// reading; at most maxPrimaryWait away when the server cannot be woken
// (agent.Agent).
func (sh *primaryShell) NextDue() (int64, bool) {
	due := sh.now.Mono + int64(sequencer.IdleWait(sh.core))
	if sh.due != 0 {
		due = min(due, sh.due)
	}
	if !sh.wakeable {
		due = min(due, sh.now.Mono+int64(maxPrimaryWait))
	}
	return due, true
}

func (sh *primaryShell) frame(frame []byte, from transport.Peer) {
	sh.acks.SetPublished(sh.core.Published())
	sh.acks.Observe(frame, from)
	_ = sh.core.Step(sh.read(), frame, from) // malformed frames are counted by the core
	sh.out.send(sh.core)                     // before the next call: Ready's contract
}

// Poll steps the frames that come within wait (agent.Agent).
func (sh *primaryShell) Poll(wait time.Duration) (int, error) {
	sh.fresh = false
	if wait > 0 {
		sh.polls++
	}
	return sh.srv.Poll(sh.onFrame, wait)
}

// DoWork moves stable, flushes, ticks, flushes the transport and
// publishes the positions (agent.Agent); only a closed transport, or
// what between says, is an error.
func (sh *primaryShell) DoWork(int64) (int, error) {
	core := sh.core
	if core.PendingStandbyAcks() {
		// Acks reached the tracker through Observe; the Core's own queue
		// (for sequencer.Agent's shell) is dropped here.
		sh.ackBuf = core.TakeStandbyAcks(sh.ackBuf[:0])
	}
	t := sh.read()
	sh.n.controls.Apply(core, t) // hot-hot activation asked by an operator
	core.SetStable(sh.acks.Stable(sh.self.position(core.Published())))
	core.Flush(t)
	sh.out.send(core)
	core.Tick(t)
	sh.out.send(core)
	if err := sh.srv.Flush(); errors.Is(err, transport.ErrClosed) {
		return 0, err
	}
	sh.n.stable.Store(core.Stable())
	sh.n.published.Store(core.Published())
	sh.n.lastStamp.Store(core.LastTime())
	if t.Mono-sh.snapAt >= int64(statsEvery) {
		sh.snapAt = t.Mono
		sh.n.setSequencerStats(core.Stats())
	}
	if sh.between != nil {
		return 0, sh.between(t)
	}
	return 0, nil
}

// turn runs one iteration of the runner and returns its clock reading;
// only a failed Poll or a closed transport is an error (or between's).
func (sh *primaryShell) turn() (sequencer.Time, error) {
	err := sh.run.Once(sh)
	return sh.now, err
}

// checkpointer proposes AddCheckpoint{epoch, stable, stamp} every
// CheckpointInterval when stable moved, without blocking the sequencing
// loop: one proposal in flight at a time, on a goroutine of its own.
type checkpointer struct {
	n       *Member
	epoch   uint64
	next    int64 // mono ns of the next proposal
	last    uint64
	busy    atomic.Bool
	wg      sync.WaitGroup
	stopped atomic.Bool
}

func newCheckpointer(n *Member, epoch uint64) *checkpointer {
	c := &checkpointer{n: n, epoch: epoch}
	if cp, ok := n.fsm.State().LastCheckpoint(); ok {
		c.last = cp.Seq // checkpoints grow: the next must be above it
	}
	return c
}

func (c *checkpointer) maybe(mono int64) {
	if mono < c.next || c.busy.Load() {
		return
	}
	c.next = mono + int64(c.n.cfg.CheckpointInterval)
	seq, stamp := c.n.stable.Load(), c.n.lastStamp.Load()
	if seq <= c.last || seq == 0 {
		return
	}
	c.last = seq
	c.busy.Store(true)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.busy.Store(false)
		if c.stopped.Load() {
			return
		}
		// Stable counts the stream's acks, which a host on the LAN can
		// forge: a checkpoint is recorded only at or below what a
		// majority of the voters say they hold over the peer port.
		if b := c.n.checkpointBound(); b < seq {
			seq = b
		}
		if cp, ok := c.n.fsm.State().LastCheckpoint(); ok && seq <= cp.Seq || seq == 0 {
			return
		}
		if _, err := c.n.apply(fsm.AddCheckpoint{Epoch: c.epoch, Seq: seq, UnixNano: stamp}); err != nil && !errors.Is(err, errNotLeader) {
			c.n.log.Warn("checkpoint", "seq", seq, "err", err)
		}
		// Stable may have moved meanwhile: the loop, perhaps blocked
		// until its next heartbeat, looks at the next due time now.
		c.busy.Store(false)
		c.n.wakePrimary()
	}()
}

// due is the mono ns at which maybe has work (a proposal of a stable that
// moved), 0 when it has none: nothing moved, or a proposal is in flight
// (its end wakes the loop).
func (c *checkpointer) due() int64 {
	if c.busy.Load() {
		return 0
	}
	if s := c.n.stable.Load(); s <= c.last || s == 0 {
		return 0
	}
	return max(c.next, 1)
}

// checkpointBound asks every other voter what it holds (peer status, at
// most a seal timeout each, in parallel) and returns the highest seq a
// majority holds, this member's written position included
// (failover.CheckpointBound).
func (n *Member) checkpointBound() uint64 {
	st := n.fsm.State()
	var voters []fsm.Member
	for _, m := range st.Members() {
		if m.Role == fsm.Voter {
			voters = append(voters, m)
		}
	}
	held := make([]uint64, len(voters))
	ok := make([]bool, len(voters))
	var wg sync.WaitGroup
	for i, m := range voters {
		if m.ID == n.cfg.ID {
			held[i], ok[i] = n.self.Load().position(n.published.Load()), true
			continue
		}
		if m.StreamAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Timeouts.Seal)
			defer cancel()
			if r, err := n.peers.RequestPeerStatus(ctx, m.StreamAddr); err == nil && r.Member == m.ID {
				held[i], ok[i] = r.Contiguous, true
			}
		}()
	}
	wg.Wait()
	var answered []uint64
	for i := range held {
		if ok[i] {
			answered = append(answered, held[i])
		}
	}
	return failover.CheckpointBound(len(voters), answered)
}

func (c *checkpointer) stop() {
	c.stopped.Store(true)
	c.wg.Wait()
}

// teeSink hands the primary's Ready to the stream server and its data
// packets to its store (the taken-over standby's, nil when there is
// none), so that the store holds the primary's own epoch when the
// primacy ends. Store errors are the store's to keep (Put); a packet it
// refused leaves the store short, and the member's seal answer then does
// not count. Only the Data packets are stored: a heartbeat is no data,
// a repair is a packet already held (by the ring or the store itself).
//
// The store is written after the Core's call returned, never from inside
// it: a repair from the store runs inside the store's Range, which holds
// the standby's lock (lockedStore), and a Put there, from a Sink the Core
// called, once waited on that lock forever while Raft kept the primary
// leader.
type teeSink struct {
	srv   transport.Server
	ret   transport.Retainer // srv's, nil when it copies every frame
	store sequencer.RetransmitStore
}

// newTeeSink is the teeSink of core over srv and store; the Core
// publishes by reference when srv can (no copy on the way to the kernel).
func newTeeSink(core *sequencer.Core, srv transport.Server, store sequencer.RetransmitStore) teeSink {
	s := teeSink{srv: srv, store: store}
	if r, ok := srv.(transport.Retainer); ok && core.SetRetained(r.MaxRetainedBytes()) {
		s.ret = r
	}
	return s
}

// send hands core's Ready over (in its order: each packet published,
// then stored; then the replies) and advances core. Send errors are the
// transport's to count.
func (s teeSink) send(core *sequencer.Core) {
	if !core.HasReady() {
		return
	}
	rd := core.Ready()
	for i := range rd.Packets {
		p := &rd.Packets[i]
		if p.Retained && s.ret != nil {
			_ = s.ret.PublishRetained(p.Bytes)
		} else {
			_ = s.srv.Publish(p.Bytes)
		}
		if p.Data && s.store != nil {
			s.store.Put(p.Bytes, sequencer.PacketInfo{})
		}
	}
	for i := range rd.Replies {
		_ = s.srv.SendTo(rd.Replies[i].To, rd.Replies[i].Bytes)
	}
	core.Advance()
}
