package standby

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/agent"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// Config sets up an Agent. Start from DefaultConfig and set
// Member and Dir.
type Config struct {
	// Member is this member's cluster id (fsm.Member.ID, never 0): every
	// ack names it, and the primary counts it only while it is a voter of
	// the epoch.
	Member uint64
	// Session is the session followed; 0 follows the live one (and takes
	// the store's when it holds one).
	Session uint64
	// Dir is the store's directory (created if missing): the stream as
	// received, gap-free, and the history a new primary answers NAKs from.
	Dir string
	// Store tunes the store (fsync policy, segments). With the interval
	// policy, fsyncs run on a goroutine of the standby (SyncInShell).
	Store replayer.Config
	// Receiver tunes the pure receiver (NAK pacing, ring sizes). The
	// standby sets Mode (Fast), Persist, Session, Rewind and RewindFrom
	// (from the store's end), and turns its Status off: acks are sent by
	// the standby itself.
	Receiver receiver.Config
	// MaxSenders must equal the sequencers' Config.MaxSenders: the State
	// forgets senders as the primary's does.
	MaxSenders int
	// AckWritten acks what was written to the store (it survives the
	// process, not the machine) instead of what was fsynced.
	AckWritten bool
	// WrittenSyncInterval and WrittenSyncBytes replace Store.SyncInterval
	// and Store.SyncBytes when AckWritten is set (and the store fsyncs on
	// the interval policy). Acks then wait for no fsync: the fsyncs only
	// bound what a power loss of the whole group could take, so they run
	// far less often than the 1 ms a durable ack needs (at that cadence
	// they cost a standby a fifth of its CPU, and the disk a journal
	// commit per millisecond, in `seqd bench --sequencers 3`).
	WrittenSyncInterval time.Duration
	WrittenSyncBytes    int64
	// AckKeepalive: an unchanged ack is sent again this often, so the
	// primary's flow control keeps hearing from the standby.
	AckKeepalive time.Duration
	// AckEveryBytes: within one poll's batch of packets, once this many
	// bytes were appended since the last ack, the standby hands them to
	// the OS and acks at once, instead of at the end of the batch (a
	// backlog of 64 datagrams of 64 KiB is 4 MiB: stable moved in steps of
	// 14k messages, each one held by every safe node until then). 0: one
	// ack per turn only.
	AckEveryBytes int
	// MaxStashBytes bounds the packets that arrived ahead of a gap and
	// wait to be appended in order (copies); past it the standby stops
	// with ErrStashFull.
	MaxStashBytes int
	// SnapshotEveryRecords: a snapshot of the State is kept every this
	// many records, so a Takeover at a cut below the State's position
	// re-applies at most this many records from the store.
	SnapshotEveryRecords uint64
	// IdleSpin keeps polling without blocking this long after each frame
	// (transport.Idle, sequencer.idle-spin): lower latency, costs a core.
	IdleSpin time.Duration
	// Clock is the monotonic clock in ns (nil: the process's).
	Clock func() int64
	// Fetch asks a peer's fetch server for the packets holding from..to
	// (cluster.Fetch), for CatchUp; nil: CatchUp from peers fails.
	Fetch func(ctx context.Context, addr string, from, to uint64, fn func(pkt []byte) error) (held uint64, err error)
}

// DefaultConfig acks written seqs (AckWritten; fsync every 100 ms or
// 16 MiB on a goroutine of the standby, every 1 ms when AckWritten is
// cleared), repeats an unchanged ack every 100 ms, and holds up to 64 MiB
// of packets ahead of a gap.
//
// Written, not durable, is the one default of the standby's ack mode, the
// one `seqd sequencer --cluster` runs (cluster.DefaultDataConfig and
// --standby.ack take it from here): a quorum of processes on separate
// machines is the durability, as in Aeron Cluster and Kafka, while a
// durable ack puts an fsync (1-4 ms) in every safe-mode round trip. A
// deployment that must survive a power loss of the whole group clears
// AckWritten (--standby.ack durable).
func DefaultConfig() Config {
	st := replayer.DefaultConfig()
	st.SyncInShell = true
	return Config{
		AckWritten:           true,
		Store:                st,
		Receiver:             receiver.DefaultConfig(),
		MaxSenders:           sequencer.DefaultConfig().MaxSenders,
		AckKeepalive:         100 * time.Millisecond,
		AckEveryBytes:        256 << 10,
		WrittenSyncInterval:  100 * time.Millisecond,
		WrittenSyncBytes:     16 << 20,
		MaxStashBytes:        64 << 20,
		SnapshotEveryRecords: 1 << 20,
	}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Member == 0:
		return fmt.Errorf("%w: Config.Member = 0, want the member's id (>= 1)", ErrConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: Config.Dir is empty, want the store's directory", ErrConfig)
	case c.MaxSenders < 1:
		return fmt.Errorf("%w: Config.MaxSenders = %d, want the sequencers' MaxSenders (>= 1)", ErrConfig, c.MaxSenders)
	case c.AckKeepalive < time.Millisecond || c.AckKeepalive > time.Minute:
		return fmt.Errorf("%w: Config.AckKeepalive = %v, want 1ms..1m", ErrConfig, c.AckKeepalive)
	case c.AckEveryBytes < 0:
		return fmt.Errorf("%w: Config.AckEveryBytes = %d, want >= 0 (0: one ack per turn)", ErrConfig, c.AckEveryBytes)
	case c.MaxStashBytes < 1<<16:
		return fmt.Errorf("%w: Config.MaxStashBytes = %d, want >= 65536", ErrConfig, c.MaxStashBytes)
	case c.SnapshotEveryRecords < 1:
		return fmt.Errorf("%w: Config.SnapshotEveryRecords = 0, want >= 1", ErrConfig)
	case c.AckWritten && c.Store.Sync == replayer.SyncInterval && (c.WrittenSyncInterval <= 0 || c.WrittenSyncInterval > time.Hour):
		return fmt.Errorf("%w: Config.WrittenSyncInterval = %v, want 1ns..1h", ErrConfig, c.WrittenSyncInterval)
	case c.AckWritten && c.Store.Sync == replayer.SyncInterval && c.WrittenSyncBytes <= 0:
		return fmt.Errorf("%w: Config.WrittenSyncBytes = %d, want > 0", ErrConfig, c.WrittenSyncBytes)
	case !c.AckWritten && c.Store.Sync == replayer.SyncNone:
		return fmt.Errorf("%w: Config.Store.Sync = none acks nothing durable: set AckWritten, or another fsync policy", ErrConfig)
	}
	if err := c.Store.Validate(); err != nil {
		return fmt.Errorf("Config.Store: %w", err)
	}
	return nil
}

// Stats are an Agent's counters.
type Stats struct {
	Appended     uint64 // packets appended to the store
	Stashed      uint64 // packets held until the gap before them filled
	Duplicates   uint64 // packets the store held already
	Truncated    uint64 // packets cut at a newer epoch's start before appending
	Applied      uint64 // records applied to the State
	AcksSent     uint64
	SealedDrops  uint64 // stream frames of a sealed epoch dropped
	Fetched      uint64 // packets appended by CatchUp
	Fsyncs       uint64
	Contiguous   uint64 // highest seq the store holds whole
	Durable      uint64 // highest seq fsynced
	Acked        uint64 // last seq acked
	ReceiverErrs uint64 // malformed frames counted by the receiver
	Healed       uint64 // divergences recovered: records past a cut dropped (see Core.heal)
	// SnapshotsWritten and SnapshotWriteErrs count the State's snapshot
	// files (snapfile.go; a failed write costs a longer rebuild at the
	// next open, nothing else).
	SnapshotsWritten  uint64
	SnapshotWriteErrs uint64
}

// Agent follows the stream as a standby sequencer (see the package
// comment): the thin shell of a Core, run by an agent.Runner (Run) or
// step by step (Step, Work). Seal, CatchUp, Takeover, Contiguous, Stats
// and FetchRange are safe from other goroutines.
type Agent struct {
	cfg    Config
	client transport.Client
	waker  transport.Waker // nil when the client cannot be woken
	clock  func() int64
	run    *agent.Runner // Run's; nil before it

	// mu guards core and running; Run holds it per stream frame and per
	// loop turn, never while it waits in Poll. Lock order: mu, then
	// nothing (the transport is called under it, and takes its own).
	mu      sync.Mutex
	core    *Core
	running bool
	ran     bool  // Run drove it (a real shell), not Step and Work
	now     int64 // the last DoWork's reading

	syncer *replayer.Syncer // Run's fsyncs, one out at a time (Core.StartSync)
	// hist runs the fsyncs of the store once it is a primary's History
	// (Takeover): set under mu, used under mu.
	hist *historySync

	contiguous atomic.Uint64 // core.Contiguous, published under mu
	onFrame    transport.Handler
}

// New opens the Core (see NewCore) and wraps it in its shell. The client
// is the stream transport (commands and acks go to the primary through
// it); the Agent closes neither.
func New(cfg Config, client transport.Client) (*Agent, error) {
	core, err := NewCore(cfg)
	if err != nil {
		return nil, err
	}
	s := &Agent{cfg: core.cfg, client: client, core: core}
	s.waker, _ = client.(transport.Waker)
	s.clock = cfg.Clock
	if s.clock == nil {
		base := time.Now()
		s.clock = func() int64 { return int64(time.Since(base)) }
	}
	s.contiguous.Store(core.Contiguous())
	s.onFrame = s.frame
	return s, nil
}

// Opened is how the Agent's Core rebuilt the State from the store
// (a snapshot file, the records applied after it, files not believed).
func (s *Agent) Opened() Opened {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Opened()
}

// Run follows the stream until ctx ends (it returns ctx.Err()), Takeover
// (nil), or a fatal error: the transport closed, the store failed, the
// receiver stopped (ErrUnrecoverable: what it lacks is gone from every
// source; a new epoch that cuts records this standby holds is healed, see
// Core.heal), the stash overflowed. The store stays open after Run
// (Takeover hands it over; Close closes it).
func (s *Agent) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.core.Taken() || s.core.Err() != nil {
		err := s.core.Err()
		if err == nil {
			err = fmt.Errorf("%w: or already running", ErrTakenOver)
		}
		s.mu.Unlock()
		return err
	}
	s.running, s.ran = true, true
	if err := s.core.Rebase(); err != nil {
		s.running = false
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	rc := agent.DefaultConfig()
	rc.MaxWait, rc.Spin, rc.Clock = maxStandbyWait, s.cfg.IdleSpin, s.clock
	run, err := agent.NewRunner(rc)
	if err != nil {
		return err
	}
	s.run = run

	if s.waker != nil {
		// A Poll blocked when ctx ends returns at once: the Node stops
		// the standby on the way to its Takeover.
		stop := context.AfterFunc(ctx, s.waker.Wake)
		defer stop()
	}
	var wake func()
	if s.waker != nil {
		wake = s.waker.Wake
	}
	s.syncer = replayer.NewSyncer(wake)
	defer func() {
		if req, err, ok := s.syncer.Wait(); ok {
			s.finishSync(req, err)
		}
		s.syncer.Close()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	if err := run.Run(ctx, s); !errors.Is(err, errTaken) {
		return err
	}
	return nil
}

// maxStandbyWait bounds a Poll of Run.
const maxStandbyWait = 100 * time.Millisecond

// Poll reads the stream for up to wait (agent.Agent), then takes the
// outcome of the fsync under way if it came.
func (s *Agent) Poll(wait time.Duration) (int, error) {
	got, err := s.client.Poll(s.onFrame, wait)
	if err != nil {
		return 0, fmt.Errorf("standby: member %d: %w", s.cfg.Member, err)
	}
	if req, err, ok := s.syncer.Done(); ok {
		s.finishSync(req, err)
	}
	return got, nil
}

func (s *Agent) finishSync(req replayer.SyncRequest, err error) {
	s.mu.Lock()
	s.core.FinishSync(req, err)
	s.mu.Unlock()
}

// DoWork is the rest of a turn of Run (agent.Agent): the Core's timers
// and the store's tick, the ack sent, then the fsync that is due handed
// to its goroutine (after the ack: a written ack waits for no fsync, and
// waking that goroutine on a busy machine must not delay the round trip
// of a safe message), and the transport flushed.
func (s *Agent) DoWork(now int64) (int, error) {
	s.mu.Lock()
	if s.core.Taken() {
		s.mu.Unlock()
		return 0, errTaken
	}
	s.now = now
	s.core.Tick(now)
	s.core.Ack(now)
	s.sendLocked()
	if req, ok := s.core.StartSync(); ok {
		s.syncer.Start(req)
	}
	err := s.core.Err()
	s.publishLocked()
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if ferr := s.client.Flush(); errors.Is(ferr, transport.ErrClosed) {
		return 0, fmt.Errorf("standby: member %d: %w", s.cfg.Member, ferr)
	}
	return 1, nil
}

// NextDue is the Core's next timed work (agent.Agent), or one fsync
// interval while an fsync is out and its goroutine cannot wake the
// client.
func (s *Agent) NextDue() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	due, ok := s.core.NextDue()
	if s.core.Syncing() && s.waker == nil {
		due, ok = minDue(due, ok, s.now+int64(max(s.cfg.Store.SyncInterval, minSyncWait)))
	}
	return due, ok
}

// frame steps one stream frame into the Core and sends what it asks.
func (s *Agent) frame(f []byte, _ transport.Peer) {
	s.mu.Lock()
	if s.core.Err() == nil && !s.core.Taken() {
		s.core.Step(s.clock(), f)
		s.sendLocked()
		s.publishLocked()
	}
	s.mu.Unlock()
}

// sendLocked sends the Core's Ready: loss is repaired (the receiver asks
// again, the ack is repeated), so send errors are the transport's to
// count.
func (s *Agent) sendLocked() {
	rd := s.core.Ready()
	for _, f := range rd.Send {
		_ = s.client.Send(f)
	}
	if rd.Ack != nil {
		_ = s.client.Send(rd.Ack)
	}
	s.core.Advance()
}

// publishLocked publishes what the store holds for Contiguous.
func (s *Agent) publishLocked() { s.contiguous.Store(s.core.Contiguous()) }

// ackLocked sends the ack when the acked seq moved, or as a keepalive.
func (s *Agent) ackLocked(now int64) {
	s.core.Ack(now)
	s.sendLocked()
}

// KnowEpoch tells the standby that epoch started at seq start (from the
// failover state, e.g. when it opens): see Core.KnowEpoch.
func (s *Agent) KnowEpoch(epoch uint32, start uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.core.KnowEpoch(epoch, start)
	s.publishLocked()
}

// CheckSession refuses a store of another session: see Core.CheckSession.
func (s *Agent) CheckSession(session uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.CheckSession(session)
}

// Seal stops acking epoch and every earlier one: see Core.Seal.
func (s *Agent) Seal(epoch uint32) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Seal(epoch)
}

// HeldEpoch is the epoch of the newest record held: see Core.HeldEpoch.
func (s *Agent) HeldEpoch() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.HeldEpoch()
}

// LastStamp is the newest sequencer time seen (Core.LastStamp).
func (s *Agent) LastStamp() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.LastStamp()
}

// Contiguous is the highest seq the store holds with no gap.
func (s *Agent) Contiguous() uint64 { return s.contiguous.Load() }

// Stats returns the counters.
func (s *Agent) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Stats()
}

// Err is the error that stopped Run for good, or nil.
func (s *Agent) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Err()
}

// Snapshot returns the State's snapshot and position (tests, checks).
func (s *Agent) Snapshot() (seq uint64, snap []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Snapshot()
}

// CatchUp fetches what the store lacks up to cut from peers (fetch
// addresses, tried in order, then again while ctx lasts, through
// Config.Fetch), so that it holds 1..cut. Packets are cut at cut:
// nothing above it is stored.
func (s *Agent) CatchUp(ctx context.Context, cut uint64, peers []string) error {
	if s.cfg.Fetch == nil && len(peers) > 0 {
		return fmt.Errorf("%w: Config.Fetch is nil: no way to fetch from peers %v", ErrCatchUp, peers)
	}
	var errs []error
	for round := 0; ; round++ {
		have := s.Contiguous()
		if have >= cut {
			return nil
		}
		for _, addr := range peers {
			_, err := s.cfg.Fetch(ctx, addr, have+1, cut, func(pkt []byte) error { return s.fetched(pkt, cut) })
			if err != nil {
				errs = append(errs, err)
			}
			if have = s.Contiguous(); have >= cut {
				return nil
			}
		}
		if round >= 2 || ctx.Err() != nil {
			return fmt.Errorf("%w: holds up to %d, cut %d, peers %v: %w", ErrCatchUp, have, cut, peers, errors.Join(errs...))
		}
	}
}

// fetched appends one fetched packet (cut at cut).
func (s *Agent) fetched(p []byte, cut uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.core.Fetched(p, cut)
	s.publishLocked()
	return err
}

// Takeover hands the standby's stream to a new primary whose epoch
// starts at cut+1 (see Core.Takeover): the State at exactly cut and the
// store as History, which answers NAKs at or below the cut. From then on
// the standby is done: Run returns nil, and the History belongs to the
// primary's goroutine (its reads take the standby's lock, shared with
// FetchRange).
func (s *Agent) Takeover(cut uint64) (sequencer.Takeover, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.core.Takeover(cut)
	if err != nil {
		return sequencer.Takeover{}, err
	}
	if s.hist == nil && s.cfg.Store.Sync == replayer.SyncInterval {
		s.hist = &historySync{}
		if s.ran {
			// Run drove it: a real shell, whose loop must not wait for
			// the disk. Stepped (Step, Work: a simulator), the History
			// fsyncs inline, as Work does, so that a run replays.
			s.hist.syncer = replayer.NewSyncer(nil)
		}
	}
	return sequencer.Takeover{State: st, History: lockedStore{s}}, nil
}

// historySync runs the fsyncs of a primary's History off the primary's
// sequencing loop, as Run does for the standby: the store is fsynced on
// the interval policy (every WrittenSyncBytes or interval while written
// acks are the mode, every SyncBytes or SyncInterval for durable ones) on
// a goroutine of its own, the outcome taken at the next Put. Without it
// the primary's store was fsynced only when a segment rolled, inline, on
// the sequencing goroutine: 128 MiB of dirty pages written back there
// stalled the primary for 75-155 ms at each roll in `seqd bench
// --sequencers 3` (the senders' commands timed out and whole windows were
// resent), and its Durable never moved in between.
type historySync struct {
	syncer *replayer.Syncer // nil: fsync inline (a stepped Agent)
	ticked int64            // the clock at the last Store.Tick (advances the interval policy's clock)
}

// historyTurnLocked takes a finished fsync of the History, and starts
// the one due. The store's clock moves at most once per sync interval
// (Store.Tick also hands the waiting bytes to the OS).
func (s *Agent) historyTurnLocked() {
	h := s.hist
	if h == nil {
		return
	}
	if h.syncer != nil {
		if req, err, ok := h.syncer.Done(); ok {
			s.core.FinishSync(req, err)
		}
	}
	if now := s.clock(); now-h.ticked >= int64(s.core.cfg.Store.SyncInterval) {
		h.ticked = now
		_ = s.core.store.Tick(now) // a write failure fails the store: its Err says why
	}
	if req, ok := s.core.StartSync(); ok {
		if h.syncer == nil {
			s.core.FinishSync(req, req.Run())
			return
		}
		h.syncer.Start(req)
	}
}

// Close closes the store (after Run returned). A store handed over by
// Takeover is the primary's to keep: close it when the primary is done
// (the fsync under way, if any, is waited for first).
func (s *Agent) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hist; h != nil && h.syncer != nil {
		if req, err, ok := h.syncer.Wait(); ok {
			s.core.FinishSync(req, err)
		}
		h.syncer.Close()
	}
	s.hist = nil
	return s.core.Close()
}

// FetchRange serves the store to a fetch server (see cluster.FetchSource),
// under the standby's lock.
func (s *Agent) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.FetchRange(dst, from, to, maxBytes)
}

// lockedStore is the store as a new primary's History: every call takes
// the standby's lock, which a fetch server shares.
type lockedStore struct{ s *Agent }

func (l lockedStore) Put(pkt []byte, info sequencer.PacketInfo) {
	l.s.mu.Lock()
	l.s.core.PutOwn(pkt, info)
	l.s.historyTurnLocked()
	l.s.mu.Unlock()
}

func (l lockedStore) Oldest() (sequencer.PacketInfo, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.core.Store().Oldest()
}

func (l lockedStore) Newest() (sequencer.PacketInfo, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.core.Store().Newest()
}

func (l lockedStore) Range(from, to uint64, fn sequencer.PacketFunc) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.core.Store().Range(from, to, fn)
}

// Written hands the frames the primary put to the operating system and
// returns the highest contiguous seq written: what this member's own copy
// counts toward stable while it is primary, as a standby's ack counts
// (under Config.AckWritten; what was fsynced otherwise, fsyncing when the
// store's policy is due). A primary that counted what it only published
// could not count its seal answer after a restart (issue 14 item 2).
func (l lockedStore) Written() uint64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	st := l.s.core.Store()
	if err := st.Tick(l.s.clock()); err != nil {
		return st.Durable()
	}
	if l.s.cfg.AckWritten {
		return st.Contiguous()
	}
	if st.SyncDue() {
		if err := st.Sync(); err != nil {
			return st.Durable()
		}
	}
	return st.Durable()
}

// Source is another member's store as CatchUpFrom reads it: an Agent's
// FetchRange (the method a fetch server serves).
type Source interface {
	FetchRange(dst []byte, from, to uint64, maxBytes int) (out []byte, next uint64, done bool, held uint64, err error)
}

var (
	_ Source      = (*Agent)(nil)
	_ agent.Agent = (*Agent)(nil)
)
