package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// StandbyConfig sets up a Standby. Start from DefaultStandbyConfig and set
// Member and Dir.
type StandbyConfig struct {
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
}

// DefaultStandbyConfig acks fsynced seqs (fsync every 1 ms on a goroutine
// of the standby; with AckWritten every 100 ms or 16 MiB), repeats an
// unchanged ack every 100 ms, and holds up to 64 MiB of packets ahead of
// a gap.
func DefaultStandbyConfig() StandbyConfig {
	st := replayer.DefaultConfig()
	st.SyncInShell = true
	return StandbyConfig{
		Store:                st,
		Receiver:             receiver.DefaultConfig(),
		MaxSenders:           sequencer.DefaultConfig().MaxSenders,
		AckKeepalive:         100 * time.Millisecond,
		WrittenSyncInterval:  100 * time.Millisecond,
		WrittenSyncBytes:     16 << 20,
		MaxStashBytes:        64 << 20,
		SnapshotEveryRecords: 1 << 20,
	}
}

// Validate names the first field out of range.
func (c StandbyConfig) Validate() error {
	switch {
	case c.Member == 0:
		return fmt.Errorf("%w: StandbyConfig.Member = 0, want the member's id (>= 1)", ErrConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: StandbyConfig.Dir is empty, want the store's directory", ErrConfig)
	case c.MaxSenders < 1:
		return fmt.Errorf("%w: StandbyConfig.MaxSenders = %d, want the sequencers' MaxSenders (>= 1)", ErrConfig, c.MaxSenders)
	case c.AckKeepalive < time.Millisecond || c.AckKeepalive > time.Minute:
		return fmt.Errorf("%w: StandbyConfig.AckKeepalive = %v, want 1ms..1m", ErrConfig, c.AckKeepalive)
	case c.MaxStashBytes < 1<<16:
		return fmt.Errorf("%w: StandbyConfig.MaxStashBytes = %d, want >= 65536", ErrConfig, c.MaxStashBytes)
	case c.SnapshotEveryRecords < 1:
		return fmt.Errorf("%w: StandbyConfig.SnapshotEveryRecords = 0, want >= 1", ErrConfig)
	case c.AckWritten && c.Store.Sync == replayer.SyncInterval && (c.WrittenSyncInterval <= 0 || c.WrittenSyncInterval > time.Hour):
		return fmt.Errorf("%w: StandbyConfig.WrittenSyncInterval = %v, want 1ns..1h", ErrConfig, c.WrittenSyncInterval)
	case c.AckWritten && c.Store.Sync == replayer.SyncInterval && c.WrittenSyncBytes <= 0:
		return fmt.Errorf("%w: StandbyConfig.WrittenSyncBytes = %d, want > 0", ErrConfig, c.WrittenSyncBytes)
	case !c.AckWritten && c.Store.Sync == replayer.SyncNone:
		return fmt.Errorf("%w: StandbyConfig.Store.Sync = none acks nothing durable: set AckWritten, or another fsync policy", ErrConfig)
	}
	if err := c.Store.Validate(); err != nil {
		return fmt.Errorf("StandbyConfig.Store: %w", err)
	}
	return nil
}

// StandbyStats are a Standby's counters.
type StandbyStats struct {
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
	Healed       uint64 // divergences recovered: records past a cut dropped (see healLocked)
}

// Standby follows the stream as a standby sequencer (see the package
// comment). Run drives it; Seal, CatchUp, Takeover, Contiguous, Stats and
// FetchRange are safe from other goroutines.
type Standby struct {
	cfg    StandbyConfig
	client transport.Client
	waker  transport.Waker // nil when the client cannot be woken
	clock  func() int64
	yield  transport.Yield // Run goroutine only

	// mu guards everything below; Run holds it per stream frame and per
	// loop turn, never while it waits in Poll. Lock order: mu, then
	// nothing (the transport is called under it, and takes its own).
	mu       sync.Mutex
	store    *replayer.Store
	state    *sequencer.State
	r        *receiver.Receiver
	rcfg     receiver.Config
	sealed   uint32 // every epoch up to it is sealed: no acks, no intake
	taken    bool
	takenCut uint64 // the cut of the Takeover: nothing above it is served
	running  bool
	err      error // sticky: why Run stopped for good
	snaps    []stateSnap
	stash    replayer.Reorder
	epochs   replayer.EpochStarts
	stats    StandbyStats
	rec      wire.Record
	pkt      wire.Packet
	trimBuf  []byte
	cutBuf   []byte // drainStashTo's trims
	ackBuf   [wire.StatusStandbyBytes]byte
	ackSt    wire.Status
	acked    uint64
	ackEpoch uint32
	ackAt    int64
	ackAny   bool
	dirty    bool // appended since the last fsync started (interval policy)
	syncOut  bool

	contiguous atomic.Uint64
	onFrame    transport.Handler
}

type stateSnap struct {
	seq  uint64
	snap []byte
}

// NewStandby opens (or creates) the store in cfg.Dir, rebuilds the State
// from it (it must hold the session from seq 1, or be empty), and
// prepares a receiver that repairs the stream from the store's end. The
// client is the stream transport (commands and acks go to the primary
// through it); the Standby closes neither.
func NewStandby(cfg StandbyConfig, client transport.Client) (*Standby, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store.Sync == replayer.SyncInterval {
		cfg.Store.SyncInShell = true
		if cfg.AckWritten {
			cfg.Store.SyncInterval, cfg.Store.SyncBytes = cfg.WrittenSyncInterval, cfg.WrittenSyncBytes
		}
	}
	if cfg.Store.Session == 0 {
		cfg.Store.Session = cfg.Session
	}
	store, _, err := replayer.Open(cfg.Dir, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("cluster: standby %d: open store: %w", cfg.Member, err)
	}
	s := &Standby{cfg: cfg, client: client, store: store, state: sequencer.NewState(cfg.MaxSenders, 1)}
	s.waker, _ = client.(transport.Waker)
	s.clock = cfg.Clock
	if s.clock == nil {
		base := time.Now()
		s.clock = func() int64 { return int64(time.Since(base)) }
	}
	if old, ok := store.Oldest(); ok && old.FirstSeq != 1 {
		store.Close()
		return nil, fmt.Errorf("cluster: standby %d: the store in %s starts at seq %d, not 1: the State cannot be rebuilt", cfg.Member, cfg.Dir, old.FirstSeq)
	}
	s.snaps = append(s.snaps, stateSnap{seq: 0, snap: s.state.Snapshot()})
	if err := s.applyStoreLocked(s.state, store.Contiguous()); err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: standby %d: rebuild the state from %s: %w", cfg.Member, cfg.Dir, err)
	}
	for _, e := range store.Epochs() {
		s.epochs.Add(e.Epoch, e.Start)
	}
	rc := cfg.Receiver
	rc.Mode, rc.Persist, rc.StatusInterval, rc.Replayer = receiver.Fast, true, 0, true
	rc.Session = max(cfg.Session, store.Session())
	rc.Rewind, rc.RewindFrom = true, store.Contiguous()+1
	s.rcfg = rc
	if s.r, err = receiver.New(rc); err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: standby %d: %w", cfg.Member, err)
	}
	s.trimBuf = make([]byte, 0, cfg.Store.MaxPacketBytes)
	s.stash.Init(cfg.MaxStashBytes)
	s.contiguous.Store(store.Contiguous())
	s.stats.Contiguous, s.stats.Durable = store.Contiguous(), store.Durable()
	s.onFrame = s.frame
	return s, nil
}

// Run follows the stream until ctx ends (it returns ctx.Err()), Takeover
// (nil), or a fatal error: the transport closed, the store failed, the
// receiver stopped (ErrUnrecoverable: what it lacks is gone from every
// source; a new epoch that cuts records this standby holds is healed, see
// healLocked), the stash overflowed. The store stays open after Run (Takeover hands it
// over; Close closes it).
func (s *Standby) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.taken || s.err != nil {
		err := s.err
		if err == nil {
			err = fmt.Errorf("%w: or already running", ErrTakenOver)
		}
		s.mu.Unlock()
		return err
	}
	s.running = true
	if err := s.restartReceiverLocked(); err != nil {
		s.running = false
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()

	if s.waker != nil {
		// A Poll blocked when ctx ends returns at once: the Member stops
		// the standby on the way to its Takeover.
		stop := context.AfterFunc(ctx, s.waker.Wake)
		defer stop()
	}
	syncReq := make(chan replayer.SyncRequest, 1)
	syncDone := make(chan error, 1)
	var syncWG sync.WaitGroup
	syncWG.Add(1)
	go func() {
		defer syncWG.Done()
		for req := range syncReq {
			syncDone <- req.Run()
			if s.waker != nil {
				s.waker.Wake()
			}
		}
	}()
	var pending replayer.SyncRequest
	finish := func(err error) {
		s.mu.Lock()
		s.syncOut = false
		if ferr := s.store.FinishSync(pending, err); ferr != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, ferr))
		}
		s.stats.Fsyncs++
		s.mu.Unlock()
	}
	defer func() {
		s.mu.Lock()
		out := s.syncOut
		s.mu.Unlock()
		if out {
			finish(<-syncDone)
		}
		close(syncReq)
		syncWG.Wait()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()

	got := 0
	idle := transport.Idle{Spin: s.cfg.IdleSpin}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wait := s.wait(got)
		var err error
		got, err = s.client.Poll(s.onFrame, idle.Wait(got, wait))
		if err != nil {
			return fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err)
		}
		select {
		case serr := <-syncDone:
			finish(serr)
		default:
		}
		now := s.clock()
		s.mu.Lock()
		if s.taken {
			s.mu.Unlock()
			return nil
		}
		s.r.Tick(now)
		s.handleReadyLocked(now)
		if err := s.store.Tick(now); err != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: store: %w", s.cfg.Member, err))
		}
		// The ack goes before the fsync is handed to its goroutine: a
		// written ack waits for no fsync, and waking that goroutine on a
		// busy machine must not delay the round trip of a safe message.
		s.ackLocked(now)
		if !s.syncOut && s.store.SyncDue() {
			if req, ok := s.store.StartSync(); ok {
				s.syncOut, s.dirty, pending = true, false, req
				syncReq <- req
			}
		}
		err = s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if ferr := s.client.Flush(); errors.Is(ferr, transport.ErrClosed) {
			return fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, ferr)
		}
		// Out of the scheduler's sight for long, this loop would lose its
		// P at every sysmon tick it spends in epoll_wait (transport.Yield).
		s.yield.Maybe(now)
	}
}

// maxStandbyWait bounds a Poll of Run.
const maxStandbyWait = 100 * time.Millisecond

// wait is how long Run may block in Poll: until the receiver's next NAK
// or the ack keepalive, or one fsync interval while bytes wait for one
// (sooner when the client cannot be woken by the fsync goroutine).
func (s *Standby) wait(got int) time.Duration {
	if got > 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	w := int64(maxStandbyWait)
	if at, ok := s.r.NextDue(); ok {
		w = min(w, at-now)
	}
	if s.ackAny {
		w = min(w, s.ackAt+int64(s.cfg.AckKeepalive)-now)
	}
	if s.dirty || s.syncOut && s.waker == nil {
		w = min(w, int64(max(s.cfg.Store.SyncInterval, 100*time.Microsecond)))
	}
	return time.Duration(max(0, w))
}

// frame steps one stream frame into the receiver and handles its output.
func (s *Standby) frame(f []byte, _ transport.Peer) {
	s.mu.Lock()
	if s.err == nil && !s.taken {
		now := s.clock()
		if s.sealed == 0 || !s.sealedFrame(f) {
			if !s.r.Started() && s.staleTailLocked(f) && s.healLocked(now, f) {
				s.mu.Unlock()
				return
			}
			if s.r.Step(now, f, receiver.Sequencer) != nil && s.r.Err() == nil {
				s.stats.ReceiverErrs++
			}
			if err := s.r.Err(); err == nil || !errors.Is(err, receiver.ErrDiverged) || !s.healLocked(now, f) {
				s.handleReadyLocked(now)
			}
		}
	}
	s.mu.Unlock()
}

// healLocked recovers from a divergence: frame f begins an epoch at a seq
// this standby already holds and applied (it was not in the sealing
// quorum, or it restarted on a store that holds the deposed primary's
// records past the cut). Those records were never stable (the cut keeps
// every stable seq), so the standby drops them: the State is rebuilt at
// the cut from a snapshot and the store, a new receiver repairs from the
// epoch start, and the store restarts there with the new epoch's first
// packet (replayer.Store keeps the cut frames and never serves them).
// It reports false, and the divergence stays fatal, when the standby
// cannot rebuild (it lacks the records up to the cut).
func (s *Standby) healLocked(now int64, f []byte) bool {
	if wire.DecodePacket(f, &s.pkt) != nil || s.pkt.Epoch < s.r.Epoch() {
		return false
	}
	start, epoch := s.pkt.EpochStart, s.pkt.Epoch
	if e, ok := s.store.EpochOf(s.store.Contiguous()); ok && e < s.pkt.Epoch {
		if next, ok := s.epochs.Next(e); ok && next.Start < start {
			start, epoch = next.Start, next.Epoch // the tail was cut by an epoch before f's
		}
	}
	if start == 0 || start-1 > s.store.Contiguous() || s.state.LastSeq() < start && s.store.Contiguous() < start {
		return false // nothing held past the start: not this divergence
	}
	st := s.state
	if st.LastSeq() > start-1 {
		i := len(s.snaps) - 1
		for s.snaps[i].seq > start-1 {
			i--
		}
		st = sequencer.NewState(s.cfg.MaxSenders, 1)
		if st.Restore(s.snaps[i].snap) != nil {
			return false
		}
		s.snaps = s.snaps[:i+1]
	}
	if s.applyStoreLocked(st, start-1) != nil || st.LastSeq() != start-1 {
		return false
	}
	if !s.beginEpochLocked(epoch, start) {
		return true // the store failed: the standby stopped
	}
	rc := s.rcfg
	rc.Rewind, rc.RewindFrom = true, start
	r, err := receiver.New(rc)
	if err != nil {
		return false
	}
	s.state, s.r = st, r
	s.epochs.Add(s.pkt.Epoch, s.pkt.EpochStart)
	s.contiguous.Store(s.heldLocked())
	s.stats.Healed++
	_ = s.r.Step(now, f, receiver.Sequencer)
	s.handleReadyLocked(now)
	return true
}

// beginEpochLocked records in the store that epoch began at start when
// the store holds records of an older epoch from start on (a deposed
// primary's, past the cut): the epoch's first packet may never come
// first (the standby heals onto a later one, which waits for it), and
// until it does the store must not take that tail as held, nor a later
// epoch's first packet after it, nor lose the epoch from its table (a
// primary serves its store as history by that table). It reports false
// when the store failed (the standby stopped).
func (s *Standby) beginEpochLocked(epoch uint32, start uint64) bool {
	if s.store.Contiguous() < start {
		return true // nothing held from start on: the epoch's packets restart nothing
	}
	if e, ok := s.store.EpochOf(start); !ok || e >= epoch {
		return true
	}
	err := s.store.BeginEpoch(epoch, start)
	if err != nil && !errors.Is(err, replayer.ErrEpochStart) {
		s.failLocked(fmt.Errorf("cluster: standby %d: record epoch %d's start at %d: %w", s.cfg.Member, epoch, start, err))
		return false
	}
	s.contiguous.Store(s.heldLocked())
	return true
}

// staleTailLocked reports whether f, the first stream frame since the
// standby opened, belongs to an epoch newer than every record the store
// holds and starts at or below the store's end: the store holds records
// past that epoch's cut (it was not in the sealing quorum, or it was the
// deposed primary), which must be healed before anything is appended.
// The receiver cannot tell: it starts after the store's end and knows
// nothing of the epochs below it.
func (s *Standby) staleTailLocked(f []byte) bool {
	if k, err := wire.PeekKind(f); err != nil || k != wire.KindData && k != wire.KindHeartbeat {
		return false
	}
	if wire.DecodePacket(f, &s.pkt) != nil || s.pkt.EpochStart == 0 {
		return false
	}
	c := s.store.Contiguous()
	e, ok := s.store.EpochOf(c)
	if !ok || e >= s.pkt.Epoch {
		return false
	}
	if s.pkt.EpochStart <= c {
		return true
	}
	// Epochs it missed between its newest record's and f's (KnowEpoch).
	next, ok := s.epochs.After(e)
	return ok && next <= c
}

// KnowEpoch tells the standby that epoch started at seq start (from the
// failover state, e.g. when it opens): a standby that missed several
// epoch changes cannot tell from the stream's newest epoch where its own
// newest epoch was cut, and would keep the cut records of its tail.
func (s *Standby) KnowEpoch(epoch uint32, start uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs.Add(epoch, start)
	if !s.r.Started() && !s.taken && s.err == nil {
		// Before the stream: the store drops a cut tail now (a running
		// receiver has taken it; its divergence heals it).
		if !s.beginEpochLocked(epoch, start) {
			return
		}
		if err := s.restartReceiverLocked(); err != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
			return
		}
	}
	held := s.heldLocked()
	s.contiguous.Store(held)
	if c := s.store.Contiguous(); held < c && s.r.Started() {
		// Told late (the stream's newer epoch came first): the receiver
		// follows on past the cut tail. A fresh one makes the next
		// stream frame heal it (staleTailLocked, healLocked), as at open.
		rc := s.rcfg
		rc.Rewind, rc.RewindFrom = true, c+1
		r, err := receiver.New(rc)
		if err != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
			return
		}
		s.r = r
	}
	if s.state.LastSeq() <= held {
		return
	}
	// The State applied the cut records of the tail: rebuild it at held
	// from the newest snapshot at or below it.
	i := len(s.snaps) - 1
	for s.snaps[i].seq > held {
		i--
	}
	st := sequencer.NewState(s.cfg.MaxSenders, 1)
	if err := st.Restore(s.snaps[i].snap); err != nil {
		s.failLocked(fmt.Errorf("cluster: standby %d: restore the snapshot at %d: %w", s.cfg.Member, s.snaps[i].seq, err))
		return
	}
	s.snaps = s.snaps[:i+1]
	if err := s.applyStoreLocked(st, held); err != nil {
		s.failLocked(fmt.Errorf("cluster: standby %d: rebuild the state at %d: %w", s.cfg.Member, held, err))
		return
	}
	s.state = st
}

// heldLocked is the highest seq the store holds with no gap that belongs
// to the stream: its contiguous seq, but not past the start of an epoch
// newer than the newest record's (while a heal waits for the new epoch's
// first packet, the store's tail is cut records). Acks, seals, fetches
// and the Takeover count only this.
func (s *Standby) heldLocked() uint64 {
	c := s.store.Contiguous()
	if e, ok := s.store.EpochOf(c); ok {
		if next, ok := s.epochs.After(e); ok && next <= c {
			return next - 1
		}
	}
	return c
}

// sealedFrame reports whether f is a stream packet of a sealed epoch that
// must not reach the store: until a newer epoch begins, the standby
// holds exactly what Seal reported. Once the receiver follows a newer
// epoch, it fences the sealed epochs' records above their cuts itself and
// repairs below them, so their packets pass again.
func (s *Standby) sealedFrame(f []byte) bool {
	if s.r.Epoch() > s.sealed {
		return false
	}
	if k, err := wire.PeekKind(f); err != nil || k != wire.KindData && k != wire.KindHeartbeat {
		return false
	}
	if wire.DecodePacket(f, &s.pkt) != nil || s.pkt.Epoch > s.sealed {
		return false
	}
	s.stats.SealedDrops++
	return true
}

// handleReadyLocked does what the receiver asks, in its order: persist
// (append to the store, in stream order), send (NAKs), deliver (apply to
// the State).
func (s *Standby) handleReadyLocked(now int64) {
	rd := s.r.Ready()
	if rd.Empty() {
		if err := s.r.Err(); err != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
		}
		return
	}
	for _, p := range rd.Persist {
		s.persistLocked(p)
	}
	for _, f := range rd.Send {
		if f.To == receiver.Sequencer {
			_ = s.client.Send(f.Bytes) // loss is repaired: the receiver asks again
		}
	}
	for i := range rd.Deliver {
		m := &rd.Deliver[i]
		if m.Seq <= s.state.LastSeq() {
			continue // applied already (from the store)
		}
		if m.Seq > s.state.LastSeq()+1 {
			// CatchUp stored what the receiver skipped: apply it from there.
			if err := s.applyStoreLocked(s.state, m.Seq-1); err != nil || s.state.LastSeq() != m.Seq-1 {
				s.failLocked(fmt.Errorf("cluster: standby %d: seq %d delivered, the state is at %d: %w", s.cfg.Member, m.Seq, s.state.LastSeq(), errors.Join(err, sequencer.ErrApplyGap)))
				break
			}
		}
		r := &s.rec
		r.Seq, r.Time, r.Flags, r.Account, r.Instance, r.CmdSeq, r.Payload = m.Seq, m.Time, m.Flags, m.Account, m.Instance, m.CmdSeq, m.Payload
		if err := s.applyLocked(s.state, r); err != nil {
			s.failLocked(fmt.Errorf("cluster: standby %d: apply seq %d: %w", s.cfg.Member, m.Seq, err))
			break
		}
	}
	s.r.Advance()
	if err := s.r.Err(); err != nil {
		s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
	}
}

// applyLocked applies one record to st and keeps the periodic snapshots
// (of the live State only).
func (s *Standby) applyLocked(st *sequencer.State, r *wire.Record) error {
	if err := st.Apply(r); err != nil {
		return err
	}
	if st == s.state {
		s.stats.Applied++
		if last := s.snaps[len(s.snaps)-1].seq; r.Seq-last >= s.cfg.SnapshotEveryRecords {
			s.keepSnapLocked()
		}
	}
	return nil
}

// keepSnapLocked snapshots the live State: the base (seq 0) and the two
// newest are kept.
func (s *Standby) keepSnapLocked() {
	sn := stateSnap{seq: s.state.LastSeq(), snap: s.state.Snapshot()}
	if len(s.snaps) >= 3 {
		copy(s.snaps[1:], s.snaps[2:])
		s.snaps = s.snaps[:len(s.snaps)-1]
	}
	s.snaps = append(s.snaps, sn)
}

// persistLocked appends a packet the receiver took, in stream order: a
// packet ahead of a gap waits in the stash until the gap is filled.
func (s *Standby) persistLocked(p []byte) {
	switch err := s.appendLocked(p); {
	case err == nil:
		s.drainStashLocked()
	case errors.Is(err, replayer.ErrGap):
		if _, err := s.stash.Put(p); err != nil {
			if errors.Is(err, replayer.ErrPendingFull) {
				err = ErrStashFull
			}
			s.failLocked(fmt.Errorf("cluster: standby %d: %w (%d bytes wait behind seq %d)", s.cfg.Member, err, s.stash.Bytes(), s.store.Contiguous()+1))
			return
		}
		s.stats.Stashed++
	case errors.Is(err, replayer.ErrDuplicate), errors.Is(err, errCut):
		s.stats.Duplicates++
	default:
		s.failLocked(fmt.Errorf("cluster: standby %d: append: %w", s.cfg.Member, err))
	}
}

// errCut: a packet wholly above a newer epoch's start (never stored).
var errCut = errors.New("cluster: packet above its epoch's cut")

// appendLocked appends p to the store, cut at the start of the next
// epoch when one is known and p's records run into it (a repair of an
// older epoch resent by a newer primary may straddle the cut).
func (s *Standby) appendLocked(p []byte) error {
	if err := wire.DecodePacket(p, &s.pkt); err != nil {
		return err
	}
	s.epochs.Add(s.pkt.Epoch, s.pkt.EpochStart)
	if _, ok := s.store.Newest(); !ok && s.pkt.FirstSeq != 1 {
		// An empty store would take any packet first; the standby's
		// starts at seq 1, where its State starts.
		return replayer.ErrGap
	}
	if held := s.store.Contiguous(); s.pkt.EpochStart <= held && s.pkt.FirstSeq != s.pkt.EpochStart {
		// The store's tail past this epoch's start is a cut one (being
		// healed): nothing of the epoch goes after it; the epoch's first
		// packet restarts the store at its start, and this one waits.
		if e, ok := s.store.EpochOf(held); ok && e < s.pkt.Epoch {
			return replayer.ErrGap
		}
	}
	if limit, ok := s.epochs.After(s.pkt.Epoch); ok && s.pkt.LastSeq() >= limit {
		if s.pkt.FirstSeq >= limit {
			return errCut
		}
		var err error
		if p, err = trimPacket(s.trimBuf[:0], p, limit-1); err != nil {
			return err
		}
		s.stats.Truncated++
	}
	if err := s.store.Append(p); err != nil {
		return err
	}
	s.stats.Appended++
	s.dirty = s.cfg.Store.Sync == replayer.SyncInterval
	s.contiguous.Store(s.heldLocked())
	return nil
}

// drainStashLocked appends the stashed packets that now follow the store.
func (s *Standby) drainStashLocked() { s.drainStashTo(^uint64(0)) }

// drainStashTo is drainStashLocked keeping nothing above seq limit: a
// catch-up to a cut drops the sealed epoch's packets that arrived ahead
// of a gap and lie above the cut (never stable, and the next epoch
// replaces them).
func (s *Standby) drainStashTo(limit uint64) {
	for s.stash.Len() > 0 {
		p := s.stash.First().Frame
		if s.stash.First().FirstSeq > limit {
			s.stash.Drop()
			s.stats.Duplicates++
			continue
		}
		if limit != ^uint64(0) {
			if wire.DecodePacket(p, &s.pkt) == nil && s.pkt.LastSeq() > limit {
				var err error
				// Its own buffer: appendLocked may trim into trimBuf.
				if p, err = trimPacket(s.cutBuf[:0], p, limit); err != nil {
					s.stash.Drop()
					continue
				}
				s.cutBuf = p[:0]
				s.stats.Truncated++
			}
		}
		err := s.appendLocked(p)
		switch {
		case err == nil, errors.Is(err, replayer.ErrDuplicate), errors.Is(err, errCut):
			s.stash.Drop()
		case errors.Is(err, replayer.ErrGap):
			return
		default:
			s.failLocked(fmt.Errorf("cluster: standby %d: append: %w", s.cfg.Member, err))
			return
		}
	}
}

// ackLocked sends the ack when the acked seq moved (at once: stable
// waits for it), or as a keepalive. Nothing is acked for a sealed epoch.
func (s *Standby) ackLocked(now int64) {
	if !s.r.Started() || s.err != nil {
		return
	}
	ep := s.r.Epoch()
	if ep <= s.sealed {
		return
	}
	held := s.heldLocked()
	v := min(s.store.Durable(), held)
	if s.cfg.AckWritten {
		v = held
	}
	s.stats.Durable = s.store.Durable()
	s.stats.Contiguous = held
	if s.ackAny && v == s.acked && ep == s.ackEpoch && now-s.ackAt < int64(s.cfg.AckKeepalive) {
		return
	}
	st := &s.ackSt
	*st = wire.Status{Session: s.r.Session(), Epoch: ep, Flags: wire.StatusReplayer | wire.StatusStandby,
		Contiguous: v, Delivered: min(v, s.state.LastSeq()), Member: s.cfg.Member}
	b, err := wire.AppendStatus(s.ackBuf[:], st)
	if err != nil {
		return // cannot happen: the buffer fits and the fields are valid
	}
	_ = s.client.Send(b)
	s.ackAny, s.acked, s.ackEpoch, s.ackAt = true, v, ep, now
	s.stats.AcksSent++
	s.stats.Acked = v
}

func (s *Standby) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Seal stops acking epoch and every earlier one, for good, and stops
// taking their packets from the stream, so the standby holds exactly
// what it reports until a newer epoch begins: the highest seq its store
// holds with no gap. Sealing an epoch older than one sealed already
// fails (ErrSealed): that seal comes from a stale leader.
func (s *Standby) Seal(epoch uint32) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch < s.sealed {
		return 0, fmt.Errorf("%w: seal of epoch %d, epoch %d is sealed", ErrSealed, epoch, s.sealed)
	}
	if s.taken {
		return 0, ErrTakenOver
	}
	if s.err != nil {
		return 0, s.err
	}
	s.sealed = epoch
	return s.heldLocked(), nil
}

// HeldEpoch is the epoch of the newest record held (Seal's seq), 0 for
// none. A leader that seals epoch e must not count records of an older
// epoch e' past the cut of e' (the start of e'+1, known from the
// failover state): a standby that missed every epoch after e' (down or cut
// off during those changes) cannot tell them from the stream.
func (s *Standby) HeldEpoch() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := s.store.EpochOf(s.heldLocked())
	return e
}

// Contiguous is the highest seq the store holds with no gap.
func (s *Standby) Contiguous() uint64 { return s.contiguous.Load() }

// Stats returns the counters.
func (s *Standby) Stats() StandbyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Contiguous, st.Durable = s.heldLocked(), s.store.Durable()
	return st
}

// Err is the error that stopped Run for good, or nil.
func (s *Standby) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Snapshot returns the State's snapshot and position (tests, checks).
func (s *Standby) Snapshot() (seq uint64, snap []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.LastSeq(), s.state.Snapshot()
}

// CatchUp fetches what the store lacks up to cut from peers (fetch
// addresses, tried in order, then again while ctx lasts), so that it
// holds 1..cut. Packets are cut at cut: nothing above it is stored.
func (s *Standby) CatchUp(ctx context.Context, cut uint64, peers []string) error {
	var errs []error
	for round := 0; ; round++ {
		have := s.Contiguous()
		if have >= cut {
			return nil
		}
		for _, addr := range peers {
			_, err := Fetch(ctx, addr, have+1, cut, func(pkt []byte) error { return s.fetched(pkt, cut) })
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
func (s *Standby) fetched(p []byte, cut uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken {
		return ErrTakenOver
	}
	if err := wire.DecodePacket(p, &s.pkt); err != nil {
		return fmt.Errorf("cluster: fetched packet: %w", err)
	}
	if s.pkt.FirstSeq > cut {
		return nil
	}
	if _, ok := s.store.Newest(); !ok && s.pkt.FirstSeq != 1 {
		return fmt.Errorf("cluster: fetched packet at seq %d into an empty store: %w", s.pkt.FirstSeq, replayer.ErrGap)
	}
	if s.pkt.LastSeq() > cut {
		var err error
		if p, err = trimPacket(s.trimBuf[:0], p, cut); err != nil {
			return err
		}
		s.stats.Truncated++
	}
	switch err := s.store.Append(p); {
	case err == nil:
		s.stats.Fetched++
		s.dirty = s.cfg.Store.Sync == replayer.SyncInterval
		s.contiguous.Store(s.heldLocked())
		s.drainStashTo(cut)
	case errors.Is(err, replayer.ErrDuplicate):
	default:
		return fmt.Errorf("cluster: fetched packet at seq %d: %w", s.pkt.FirstSeq, err)
	}
	return nil
}

// Takeover hands the standby's stream to a new primary whose epoch starts
// at cut+1: the State applied up to exactly cut (the live one, brought
// forward from the store, or rebuilt from a snapshot when it applied
// beyond the cut) and the store as History, which answers NAKs at or
// below the cut (the Core never serves above it, and FetchRange stops
// there too). A store that holds records above the cut keeps them on
// disk: they must never be appended after (the next epoch's packets go
// to a fresh store). The store is synced first. From then on the standby is
// done: Run returns nil, and the History belongs to the primary's
// goroutine (its reads take the standby's lock, shared with FetchRange).
func (s *Standby) Takeover(cut uint64) (sequencer.Takeover, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.taken:
		return sequencer.Takeover{}, ErrTakenOver
	case s.heldLocked() < cut:
		return sequencer.Takeover{}, fmt.Errorf("%w: holds up to %d, cut %d", ErrBehindCut, s.heldLocked(), cut)
	}
	st := s.state
	if st.LastSeq() > cut {
		// Rebuild from the newest snapshot at or below the cut.
		i := len(s.snaps) - 1
		for s.snaps[i].seq > cut {
			i--
		}
		st = sequencer.NewState(s.cfg.MaxSenders, 1)
		if err := st.Restore(s.snaps[i].snap); err != nil {
			return sequencer.Takeover{}, fmt.Errorf("cluster: takeover at %d: restore the snapshot at %d: %w", cut, s.snaps[i].seq, err)
		}
	}
	if err := s.applyStoreLocked(st, cut); err != nil {
		return sequencer.Takeover{}, fmt.Errorf("cluster: takeover at %d: %w", cut, err)
	}
	if st.LastSeq() != cut {
		return sequencer.Takeover{}, fmt.Errorf("%w: the state reached %d, cut %d", ErrBehindCut, st.LastSeq(), cut)
	}
	if !s.syncOut {
		if err := s.store.Sync(); err != nil {
			return sequencer.Takeover{}, fmt.Errorf("cluster: takeover at %d: %w", cut, err)
		}
	}
	s.taken, s.takenCut = true, cut
	return sequencer.Takeover{State: st, History: lockedStore{s}}, nil
}

// applyStoreLocked applies the store's records after st's position up to
// to (a fragmented message once, at its first fragment).
func (s *Standby) applyStoreLocked(st *sequencer.State, to uint64) error {
	if st.LastSeq() >= to {
		return nil
	}
	var err error
	s.store.Records(st.LastSeq()+1, to, func(r *wire.Record, _ uint32) bool {
		if r.Seq != st.LastSeq()+1 {
			return true // a later fragment of a message applied
		}
		err = s.applyLocked(st, r)
		return err == nil
	})
	return err
}

// Close closes the store (after Run returned). A store handed over by
// Takeover is the primary's to keep: close it when the primary is done.
func (s *Standby) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store.Close()
}

// FetchRange serves the store to a PeerServer (see FetchSource), under
// the standby's lock.
func (s *Standby) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.heldLocked()
	if s.taken {
		// Records above the cut, if the store holds any, belong to no
		// stream: the new epoch replaced them.
		held = min(held, s.takenCut)
	}
	if from > held || from > to {
		return dst, from, true, held, nil
	}
	to = min(to, held)
	next, full := from, false
	s.store.Range(from, to, func(pkt []byte, info sequencer.PacketInfo) bool {
		var hdr [wire.PeerFrameHeaderBytes]byte
		wire.PutPeerFrameHeader(hdr[:], wire.PeerPacket, len(pkt))
		dst = append(append(dst, hdr[:]...), pkt...)
		if wire.DecodePacket(pkt, &s.pkt) != nil {
			return false
		}
		var r wire.Record
		whole := true
		for s.pkt.Next(&r) {
			whole = !r.Fragment() || r.Offset+uint32(len(r.Payload)) == r.Total
		}
		if whole {
			next = info.LastSeq() + 1
			if len(dst) >= maxBytes {
				full = true
				return false
			}
		}
		return true
	})
	if err := s.store.Err(); err != nil {
		return dst, next, true, held, err
	}
	return dst, next, !full || next > to, held, nil
}

// lockedStore is the store as a new primary's History: every call takes
// the standby's lock, which a PeerServer shares.
type lockedStore struct{ s *Standby }

func (l lockedStore) Put(pkt []byte, info sequencer.PacketInfo) {
	l.s.mu.Lock()
	l.s.store.Put(pkt, info)
	l.s.mu.Unlock()
}

func (l lockedStore) Oldest() (sequencer.PacketInfo, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.store.Oldest()
}

func (l lockedStore) Newest() (sequencer.PacketInfo, bool) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.store.Newest()
}

func (l lockedStore) Range(from, to uint64, fn sequencer.PacketFunc) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.store.Range(from, to, fn)
}

var _ FetchSource = (*Standby)(nil)
