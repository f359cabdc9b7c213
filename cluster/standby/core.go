package standby

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// Core is the standby's state machine: it takes stream frames (Step) and
// the clock (Tick, Ack) and says what to send (Ready); the Agent around
// it owns the transport, the clock, the lock and the fsync goroutine.
// It has no goroutines, locks, timers or sockets; its one dependency is
// the store, a replayer.Store it appends to (buffered: the bytes reach
// the OS in Tick) and reads from.
//
// What the Core does with each frame, in the receiver's order: persist
// (append to the store in stream order, packets ahead of a gap held in
// the Persister), send (the receiver's NAKs, queued for Ready), deliver
// (apply to the State). A turn of the shell then asks for the ack (Ack: the
// highest seq held, or fsynced, at once when it moved, or as a
// keepalive) and starts the fsync that is due (StartSync), after the
// ack: a written ack waits for no fsync.
//
// Not safe for concurrent use: the Agent serialises every call under its
// lock.
type Core struct {
	cfg      Config
	store    *replayer.Store
	state    *sequencer.State
	r        *receiver.Receiver
	rcfg     receiver.Config
	sealed   uint32 // every epoch up to it is sealed: no acks, no intake
	taken    bool
	takenCut uint64 // the cut of the Takeover: nothing above it is served
	// ownPut: the new primary put a packet of its own epoch (PutOwn):
	// what the store holds above the cut is the primary's, served too.
	ownPut bool
	err    error // sticky: why the standby stopped for good
	snaps  []stateSnap
	// diskSeq: the seq of each snapshot file (snapfile.go) as written or
	// loaded, 0 for none; diskNext the file the next write replaces.
	diskSeq  [2]uint64
	diskNext int
	// opened: how NewCore rebuilt the State (Opened).
	opened   Opened
	p        replayer.Persister // the stream into the store, in order
	stats    Stats
	rec      wire.Record
	pkt      wire.Packet
	ackBuf   [wire.StatusStandbyBytes]byte
	ackSt    wire.Status
	acked    uint64
	ackEpoch uint32
	ackAt    int64
	ackAny   bool
	ackBytes uint64 // the store's AppendedBytes at the last ack
	dirty    bool   // appended since the last fsync started (interval policy)
	syncOut  bool   // a StartSync's request is not finished yet
	cont     uint64 // held() as of the last change (Contiguous)
	now      int64  // the last Tick's reading

	// Ready's frames: copies of the receiver's NAKs in sendBuf (valid
	// until Advance, reused after), and the ack in ackBuf.
	send    [][]byte
	sendBuf []byte
	ackOut  []byte
}

type stateSnap struct {
	seq  uint64
	snap []byte
}

// Ready is what the Core asks its shell to send, valid until Advance:
// Send, the NAKs for the primary, first, then Ack (nil: none due). What
// it persisted is in the store already (the shell's Tick hands it to the
// OS; StartSync returns the fsync to run).
type Ready struct {
	Send [][]byte
	Ack  []byte
}

// NewCore opens (or creates) the store in cfg.Dir, rebuilds the State
// from it (it must hold the session from seq 1, or be empty), and
// prepares a receiver that repairs the stream from the store's end.
func NewCore(cfg Config) (*Core, error) {
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
	store, rec, err := replayer.Open(cfg.Dir, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("standby: member %d: open store: %w", cfg.Member, err)
	}
	if rec.Corrupt != nil {
		// Found at open, not at the first append after the standby has
		// answered seals and acked: the operator's way out is named
		// (the store is a replica; the others hold the stream).
		store.Close()
		return nil, fmt.Errorf("standby: member %d: %w: the other members hold the stream: stop this member, move %s aside (keep it for a post-mortem) and start it again on an empty directory with --join: it fetches the stream from them", cfg.Member, rec.Corrupt, cfg.Dir)
	}
	c := &Core{cfg: cfg, store: store, state: sequencer.NewState(cfg.MaxSenders, 1)}
	if old, ok := store.Oldest(); ok && old.FirstSeq != 1 {
		store.Close()
		return nil, fmt.Errorf("standby: member %d: the store in %s starts at seq %d, not 1: the State cannot be rebuilt", cfg.Member, cfg.Dir, old.FirstSeq)
	}
	c.snaps = append(c.snaps, stateSnap{seq: 0, snap: c.state.Snapshot()})
	c.restoreDiskSnap()
	if err := c.applyStore(c.state, store.Contiguous()); err != nil {
		store.Close()
		return nil, fmt.Errorf("standby: member %d: rebuild the state from %s: %w", cfg.Member, cfg.Dir, err)
	}
	for _, e := range store.Epochs() {
		c.p.Epochs().Add(e.Epoch, e.Start)
	}
	rc := cfg.Receiver
	rc.Mode, rc.Persist, rc.StatusInterval, rc.Replayer = receiver.Fast, true, 0, true
	rc.Session = max(cfg.Session, store.Session())
	rc.Rewind, rc.RewindFrom = true, store.Contiguous()+1
	rc.RewindEpoch, _ = store.EpochOf(store.Contiguous())
	c.rcfg = rc
	if c.r, err = receiver.New(rc); err != nil {
		store.Close()
		return nil, fmt.Errorf("standby: member %d: %w", cfg.Member, err)
	}
	c.p.Init(replayer.PersistConfig{MaxHeldBytes: cfg.MaxStashBytes, MaxPacketBytes: cfg.Store.MaxPacketBytes,
		FromSeqOne: true, WaitForGaps: true, GuardCutTail: true})
	c.cont = store.Contiguous()
	c.stats.Contiguous, c.stats.Durable = store.Contiguous(), store.Durable()
	c.opened.Applied, c.opened.Cuts = c.stats.Applied, rec.Cuts
	return c, nil
}

// Opened says how a Core rebuilt its State when it opened the store.
type Opened struct {
	// RestoredFrom is the seq of the snapshot file the State started
	// from (0: none, rebuilt from seq 1).
	RestoredFrom uint64
	// Applied is the records applied from the store after it.
	Applied uint64
	// Rejected are the snapshot files not believed, and why.
	Rejected []error
	// Cuts are the torn tails the store cut (a write cut short by a
	// crash; replayer.Recovery).
	Cuts []replayer.Cut
}

// Opened is how NewCore rebuilt the State.
func (c *Core) Opened() Opened { return c.opened }

// restoreDiskSnap starts the State from the newest snapshot file that
// describes the store's prefix, if any (snapfile.go); a file not
// believed is removed.
func (c *Core) restoreDiskSnap() {
	d, ok, rejected := c.loadDiskSnap()
	if ok {
		st := sequencer.NewState(c.cfg.MaxSenders, 1)
		switch err := st.Restore(d.snap); {
		case err != nil:
			rejected = append(rejected, fmt.Errorf("%w: at seq %d: %w", errSnapFile, d.seq, err))
		case st.LastSeq() != d.seq:
			rejected = append(rejected, fmt.Errorf("%w: names seq %d, its State is at %d", errSnapFile, d.seq, st.LastSeq()))
		default:
			c.state = st
			c.snaps = append(c.snaps, stateSnap{seq: d.seq, snap: d.snap})
			c.opened.RestoredFrom = d.seq
		}
		if c.opened.RestoredFrom == 0 {
			c.dropDiskSnapsAbove(0)
		}
	}
	c.opened.Rejected = rejected
	fsys := c.snapFS()
	for i, name := range snapFileNames {
		if c.diskSeq[i] == 0 {
			_ = fsys.Remove(filepath.Join(c.cfg.Dir, name)) // rejected (or none)
		}
	}
}

// CheckSession refuses a store of another session than session (the
// cluster's, from its failover state): one session per directory, as
// the replayer's (replayer.Store.CheckSession). An empty store passes.
func (c *Core) CheckSession(session uint64) error {
	if err := c.store.CheckSession(session); err != nil {
		return fmt.Errorf("standby: member %d: %w", c.cfg.Member, err)
	}
	return nil
}

// Tick runs the receiver's timers (NAKs) at now, acts on its output, and
// hands the appended bytes to the OS (the store's Tick).
func (c *Core) Tick(now int64) {
	c.now = now
	if c.err != nil || c.taken {
		return
	}
	c.r.Tick(now)
	c.handleReady(now)
	if err := c.store.Tick(now); err != nil {
		c.fail(fmt.Errorf("standby: member %d: store: %w", c.cfg.Member, err))
	}
}

// StartSync returns the fsync that is due (the interval policy), for the
// shell to run, on a goroutine of its own or inline, and to report with
// FinishSync; false when none is due or one is under way.
func (c *Core) StartSync() (replayer.SyncRequest, bool) {
	if c.err != nil || c.syncOut || !c.store.SyncDue() {
		return replayer.SyncRequest{}, false
	}
	req, ok := c.store.StartSync()
	if ok {
		c.syncOut, c.dirty = true, false
	}
	return req, ok
}

// FinishSync records the outcome of StartSync's request.
func (c *Core) FinishSync(req replayer.SyncRequest, err error) {
	c.syncOut = false
	if ferr := c.store.FinishSync(req, err); ferr != nil {
		c.fail(fmt.Errorf("standby: member %d: %w", c.cfg.Member, ferr))
	}
	c.stats.Fsyncs++
}

// Ready returns the frames to send; Advance once they are sent.
func (c *Core) Ready() Ready { return Ready{Send: c.send, Ack: c.ackOut} }

// Advance forgets what Ready returned.
func (c *Core) Advance() {
	c.send, c.sendBuf, c.ackOut = c.send[:0], c.sendBuf[:0], nil
}

// queue copies a frame to send into Ready.
func (c *Core) queue(f []byte) {
	n := len(c.sendBuf)
	c.sendBuf = append(c.sendBuf, f...)
	c.send = append(c.send, c.sendBuf[n:len(c.sendBuf):len(c.sendBuf)])
}

// NextDue is the time of the Core's next timed work as of the last Tick:
// the receiver's next NAK, the ack keepalive, the fsync interval while
// bytes wait for one.
func (c *Core) NextDue() (int64, bool) {
	due, ok := c.r.NextDue()
	if c.ackAny {
		due, ok = minDue(due, ok, c.ackAt+int64(c.cfg.AckKeepalive))
	}
	if c.dirty {
		due, ok = minDue(due, ok, c.now+int64(max(c.cfg.Store.SyncInterval, minSyncWait)))
	}
	return due, ok
}

// minSyncWait bounds how often a loop waiting for an fsync interval
// looks again.
const minSyncWait = 100 * 1000 // 100 µs, in ns

func minDue(due int64, ok bool, at int64) (int64, bool) {
	if !ok || at < due {
		return at, true
	}
	return due, true
}

// Rebase makes the receiver repair from the store's end when CatchUp
// filled the store before the receiver saw its first frame (the shell
// calls it before it follows the stream).
func (c *Core) Rebase() error { return c.restartReceiver() }

// Contiguous is the highest seq the store holds with no gap that belongs
// to the stream (see held), as of the last change.
func (c *Core) Contiguous() uint64 { return c.cont }

// Taken reports whether Takeover handed the stream over.
func (c *Core) Taken() bool { return c.taken }

// Syncing reports whether StartSync's fsync is out (not finished).
func (c *Core) Syncing() bool { return c.syncOut }

// Store is the store: the History a new primary reads after Takeover,
// and what the owner reads under the lock that serialises the Core.
func (c *Core) Store() *replayer.Store { return c.store }

// heal recovers from a divergence: frame f begins an epoch at a seq
// this standby already holds and applied (it was not in the sealing
// quorum, or it restarted on a store that holds the deposed primary's
// records past the cut). Those records were never stable (the cut keeps
// every stable seq), so the standby drops them: the State is rebuilt at
// the cut from a snapshot and the store, a new receiver repairs from the
// epoch start, and the store restarts there with the new epoch's first
// packet (replayer.Store keeps the cut frames and never serves them).
// It reports false, and the divergence stays fatal, when the standby
// cannot rebuild (it lacks the records up to the cut).
func (c *Core) heal(now int64, f []byte) bool {
	if wire.DecodePacket(f, &c.pkt) != nil || c.pkt.Epoch < c.r.Epoch() {
		return false
	}
	start, epoch := c.pkt.EpochStart, c.pkt.Epoch
	if e, ok := c.store.EpochOf(c.store.Contiguous()); ok && e < c.pkt.Epoch {
		if next, ok := c.p.Epochs().Next(e); ok && next.Start < start {
			start, epoch = next.Start, next.Epoch // the tail was cut by an epoch before f's
		}
	}
	if start == 0 || start-1 > c.store.Contiguous() || c.state.LastSeq() < start && c.store.Contiguous() < start {
		return false // nothing held past the start: not this divergence
	}
	st := c.state
	if st.LastSeq() > start-1 {
		i := len(c.snaps) - 1
		for c.snaps[i].seq > start-1 {
			i--
		}
		st = sequencer.NewState(c.cfg.MaxSenders, 1)
		if st.Restore(c.snaps[i].snap) != nil {
			return false
		}
		c.snaps = c.snaps[:i+1]
		c.dropDiskSnapsAbove(start - 1)
	}
	if c.applyStore(st, start-1) != nil || st.LastSeq() != start-1 {
		return false
	}
	if !c.beginEpoch(epoch, start) {
		return true // the store failed: the standby stopped
	}
	rc := c.rcfg
	rc.Rewind, rc.RewindFrom = true, start
	r, err := receiver.New(rc)
	if err != nil {
		return false
	}
	c.state, c.r = st, r
	c.p.Epochs().Add(c.pkt.Epoch, c.pkt.EpochStart)
	c.cont = c.held()
	c.stats.Healed++
	_ = c.r.Step(now, f, receiver.Sequencer)
	c.handleReady(now)
	return true
}

// beginEpoch records in the store that epoch began at start when
// the store holds records of an older epoch from start on (a deposed
// primary's, past the cut): the epoch's first packet may never come
// first (the standby heals onto a later one, which waits for it), and
// until it does the store must not take that tail as held, nor a later
// epoch's first packet after it, nor lose the epoch from its table (a
// primary serves its store as history by that table). It reports false
// when the store failed (the standby stopped).
func (c *Core) beginEpoch(epoch uint32, start uint64) bool {
	if c.store.Contiguous() < start {
		return true // nothing held from start on: the epoch's packets restart nothing
	}
	if e, ok := c.store.EpochOf(start); !ok || e >= epoch {
		return true
	}
	err := c.store.BeginEpoch(epoch, start)
	if err != nil && !errors.Is(err, replayer.ErrEpochStart) {
		c.fail(fmt.Errorf("standby: member %d: record epoch %d's start at %d: %w", c.cfg.Member, epoch, start, err))
		return false
	}
	c.cont = c.held()
	return true
}

// staleTail reports whether f, the first stream frame since the
// standby opened, belongs to an epoch newer than every record the store
// holds and starts at or below the store's end: the store holds records
// past that epoch's cut (it was not in the sealing quorum, or it was the
// deposed primary), which must be healed before anything is appended.
// The receiver cannot tell: it starts after the store's end and knows
// nothing of the epochs below it.
func (c *Core) staleTail(f []byte) bool {
	if k, err := wire.PeekKind(f); err != nil || k != wire.KindData && k != wire.KindHeartbeat {
		return false
	}
	if wire.DecodePacket(f, &c.pkt) != nil || c.pkt.EpochStart == 0 {
		return false
	}
	top := c.store.Contiguous()
	e, ok := c.store.EpochOf(top)
	if !ok || e >= c.pkt.Epoch {
		return false
	}
	if c.pkt.EpochStart <= top {
		return true
	}
	// Epochs it missed between its newest record's and f's (KnowEpoch).
	next, ok := c.p.Epochs().After(e)
	return ok && next <= top
}

// KnowEpoch tells the standby that epoch started at seq start (from the
// failover state, e.g. when it opens): a standby that missed several
// epoch changes cannot tell from the stream's newest epoch where its own
// newest epoch was cut, and would keep the cut records of its tail.
func (c *Core) KnowEpoch(epoch uint32, start uint64) {
	c.p.Epochs().Add(epoch, start)
	if !c.r.Started() && !c.taken && c.err == nil {
		// Before the stream: the store drops a cut tail now (a running
		// receiver has taken it; its divergence heals it).
		if !c.beginEpoch(epoch, start) {
			return
		}
		if err := c.restartReceiver(); err != nil {
			c.fail(fmt.Errorf("standby: member %d: %w", c.cfg.Member, err))
			return
		}
	}
	held := c.held()
	c.cont = held
	if top := c.store.Contiguous(); held < top && c.r.Started() {
		// Told late (the stream's newer epoch came first): the receiver
		// follows on past the cut tail. A fresh one makes the next
		// stream frame heal it (staleTail, heal), as at open.
		rc := c.rcfg
		rc.Rewind, rc.RewindFrom = true, top+1
		r, err := receiver.New(rc)
		if err != nil {
			c.fail(fmt.Errorf("standby: member %d: %w", c.cfg.Member, err))
			return
		}
		c.r = r
	}
	if c.state.LastSeq() <= held {
		return
	}
	// The State applied the cut records of the tail: rebuild it at held
	// from the newest snapshot at or below it.
	i := len(c.snaps) - 1
	for c.snaps[i].seq > held {
		i--
	}
	st := sequencer.NewState(c.cfg.MaxSenders, 1)
	if err := st.Restore(c.snaps[i].snap); err != nil {
		c.fail(fmt.Errorf("standby: member %d: restore the snapshot at %d: %w", c.cfg.Member, c.snaps[i].seq, err))
		return
	}
	c.snaps = c.snaps[:i+1]
	c.dropDiskSnapsAbove(held)
	if err := c.applyStore(st, held); err != nil {
		c.fail(fmt.Errorf("standby: member %d: rebuild the state at %d: %w", c.cfg.Member, held, err))
		return
	}
	c.state = st
}

// held is the highest seq the store holds with no gap that belongs
// to the stream: its contiguous seq, but not past the start of an epoch
// newer than the newest record's (while a heal waits for the new epoch's
// first packet, the store's tail is cut records). Acks, seals, fetches
// and the Takeover count only this.
func (c *Core) held() uint64 {
	top := c.store.Contiguous()
	if e, ok := c.store.EpochOf(top); ok {
		if next, ok := c.p.Epochs().After(e); ok && next <= top {
			return next - 1
		}
	}
	return top
}

// sealedFrame reports whether f is a stream packet of a sealed epoch that
// must not reach the store: until a newer epoch begins, the standby
// holds exactly what Seal reported. Once the receiver follows a newer
// epoch, it fences the sealed epochs' records above their cuts itself and
// repairs below them, so their packets pass again.
func (c *Core) sealedFrame(f []byte) bool {
	if c.r.Epoch() > c.sealed {
		return false
	}
	if k, err := wire.PeekKind(f); err != nil || k != wire.KindData && k != wire.KindHeartbeat {
		return false
	}
	if wire.DecodePacket(f, &c.pkt) != nil || c.pkt.Epoch > c.sealed {
		return false
	}
	c.stats.SealedDrops++
	return true
}

// handleReady does what the receiver asks, in its order: persist
// (append to the store, in stream order), send (NAKs), deliver (apply to
// the State).
func (c *Core) handleReady(now int64) {
	rd := c.r.Ready()
	if rd.Empty() {
		if err := c.r.Err(); err != nil {
			c.fail(fmt.Errorf("standby: member %d: %w", c.cfg.Member, err))
		}
		return
	}
	for _, p := range rd.Persist {
		c.persist(p)
	}
	for _, f := range rd.Send {
		if f.To == receiver.Sequencer {
			c.queue(f.Bytes) // loss is repaired: the receiver asks again
		}
	}
	for i := range rd.Deliver {
		m := &rd.Deliver[i]
		if m.Seq <= c.state.LastSeq() {
			continue // applied already (from the store)
		}
		if m.Seq > c.state.LastSeq()+1 {
			// CatchUp stored what the receiver skipped: apply it from there.
			if err := c.applyStore(c.state, m.Seq-1); err != nil || c.state.LastSeq() != m.Seq-1 {
				c.fail(fmt.Errorf("standby: member %d: seq %d delivered, the state is at %d: %w", c.cfg.Member, m.Seq, c.state.LastSeq(), errors.Join(err, sequencer.ErrApplyGap)))
				break
			}
		}
		r := &c.rec
		r.Seq, r.Time, r.Flags, r.Account, r.Instance, r.CmdSeq, r.Payload = m.Seq, m.Time, m.Flags, m.Account, m.Instance, m.CmdSeq, m.Payload
		if err := c.apply(c.state, r); err != nil {
			c.fail(fmt.Errorf("standby: member %d: apply seq %d: %w", c.cfg.Member, m.Seq, err))
			break
		}
	}
	c.r.Advance()
	if err := c.r.Err(); err != nil {
		c.fail(fmt.Errorf("standby: member %d: %w", c.cfg.Member, err))
	}
}

// apply applies one record to st and keeps the periodic snapshots
// (of the live State only).
func (c *Core) apply(st *sequencer.State, r *wire.Record) error {
	if err := st.Apply(r); err != nil {
		return err
	}
	if st == c.state {
		c.stats.Applied++
		if last := c.snaps[len(c.snaps)-1].seq; r.Seq-last >= c.cfg.SnapshotEveryRecords {
			c.keepSnap()
		}
	}
	return nil
}

// keepSnap snapshots the live State: the base (seq 0) and the two
// newest are kept.
func (c *Core) keepSnap() {
	sn := stateSnap{seq: c.state.LastSeq(), snap: c.state.Snapshot()}
	if len(c.snaps) >= 3 {
		copy(c.snaps[1:], c.snaps[2:])
		c.snaps = c.snaps[:len(c.snaps)-1]
	}
	c.snaps = append(c.snaps, sn)
	c.writeDiskSnap(sn)
}

// persist appends a packet the receiver took, in stream order (the
// standby stores on arrival: everything it takes counts as delivered):
// a packet ahead of a gap waits in the Persister until the gap is
// filled, one of an older epoch is cut at the newer one's start.
func (c *Core) persist(p []byte) {
	n := c.p.Appended()
	err := c.p.Offer(c.store, p, ^uint64(0))
	c.appended(n)
	switch {
	case err == nil:
	case errors.Is(err, replayer.ErrPendingFull):
		c.fail(fmt.Errorf("standby: member %d: %w: %w (behind seq %d)", c.cfg.Member, ErrStashFull, err, c.store.Contiguous()+1))
	default:
		c.fail(fmt.Errorf("standby: member %d: append: %w", c.cfg.Member, err))
	}
}

// appended notes what the store took since the Persister's count was n:
// the bytes wait for an fsync, and what it holds moved.
func (c *Core) appended(n uint64) {
	if c.p.Appended() != n {
		c.dirty = c.cfg.Store.Sync == replayer.SyncInterval
		c.cont = c.held()
	}
}

// Ack puts the ack in Ready when the acked seq moved (at once: stable
// waits for it), or as a keepalive. Nothing is acked for a sealed epoch.
func (c *Core) Ack(now int64) {
	if !c.r.Started() || c.err != nil {
		return
	}
	ep := c.r.Epoch()
	if ep <= c.sealed {
		return
	}
	held := c.held()
	v := min(c.store.Durable(), held)
	if c.cfg.AckWritten {
		v = held
	}
	c.stats.Durable = c.store.Durable()
	c.stats.Contiguous = held
	if c.ackAny && v == c.acked && ep == c.ackEpoch && now-c.ackAt < int64(c.cfg.AckKeepalive) {
		return
	}
	st := &c.ackSt
	*st = wire.Status{Session: c.r.Session(), Epoch: ep, Flags: wire.StatusReplayer | wire.StatusStandby,
		Contiguous: v, Delivered: min(v, c.state.LastSeq()), Member: c.cfg.Member}
	b, err := wire.AppendStatus(c.ackBuf[:], st)
	if err != nil {
		return // cannot happen: the buffer fits and the fields are valid
	}
	c.ackOut = b
	c.ackAny, c.acked, c.ackEpoch, c.ackAt = true, v, ep, now
	c.ackBytes = c.store.Stats().AppendedBytes
	c.stats.AcksSent++
	c.stats.Acked = v
}

func (c *Core) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Seal stops acking epoch and every earlier one, for good, and stops
// taking their packets from the stream, so the standby holds exactly
// what it reports until a newer epoch begins: the highest seq its store
// holds with no gap. Sealing an epoch older than one sealed already
// fails (ErrSealed): that seal comes from a stale leader.
func (c *Core) Seal(epoch uint32) (uint64, error) {
	if epoch < c.sealed {
		return 0, fmt.Errorf("%w: seal of epoch %d, epoch %d is sealed", ErrSealed, epoch, c.sealed)
	}
	if c.taken {
		return 0, ErrTakenOver
	}
	if c.err != nil {
		return 0, c.err
	}
	c.sealed = epoch
	return c.held(), nil
}

// LastStamp is the newest sequencer time the standby's receiver saw: of
// the last record delivered, or of a heartbeat once it held all the
// heartbeat announced. A new primary's clock starts no earlier (a live
// node's Now() must not go back across a failover).
func (c *Core) LastStamp() int64 { return c.r.Now() }

// HeldEpoch is the epoch of the newest record held (Seal's seq), 0 for
// none. A leader that seals epoch e must not count records of an older
// epoch e' past the cut of e' (the start of e'+1, known from the
// failover state): a standby that missed every epoch after e' (down or cut
// off during those changes) cannot tell them from the stream.
func (c *Core) HeldEpoch() uint32 {
	e, _ := c.store.EpochOf(c.held())
	return e
}

// Stats returns the counters.
func (c *Core) Stats() Stats {
	st := c.stats
	ps := c.p.Stats()
	st.Appended = ps.Appended - st.Fetched
	st.Stashed = ps.Holds
	st.Duplicates = ps.Duplicates + ps.CutWhole
	st.Truncated = ps.Cut - ps.CutWhole
	st.Contiguous, st.Durable = c.held(), c.store.Durable()
	return st
}

// Err is the error that stopped Run for good, or nil.
func (c *Core) Err() error {
	return c.err
}

// Snapshot returns the State's snapshot and position (tests, checks).
func (c *Core) Snapshot() (seq uint64, snap []byte) {
	return c.state.LastSeq(), c.state.Snapshot()
}

// Fetched appends one fetched packet (cut at cut).
func (c *Core) Fetched(p []byte, cut uint64) error {
	if c.taken {
		return ErrTakenOver
	}
	if err := wire.DecodePacket(p, &c.pkt); err != nil {
		return fmt.Errorf("standby: fetched packet: %w", err)
	}
	if c.pkt.FirstSeq > cut {
		return nil
	}
	if _, ok := c.store.Newest(); !ok && c.pkt.FirstSeq != 1 {
		return fmt.Errorf("standby: fetched packet at seq %d into an empty store: %w", c.pkt.FirstSeq, replayer.ErrGap)
	}
	n := c.p.Appended()
	err := c.p.AppendTo(c.store, p, cut)
	if c.p.Appended() != n {
		c.stats.Fetched++
	}
	c.appended(n)
	switch {
	case err == nil, errors.Is(err, replayer.ErrDuplicate):
	default:
		return fmt.Errorf("standby: fetched packet at seq %d: %w", c.pkt.FirstSeq, err)
	}
	return nil
}

// Takeover hands the standby's stream to a new primary whose epoch starts
// at cut+1: it returns the State applied up to exactly cut (the live one,
// brought forward from the store, or rebuilt from a snapshot when it
// applied beyond the cut), and the store becomes the primary's History,
// which answers NAKs at or below the cut (the sequencer's Core never
// serves above it, and FetchRange stops there too). A store that holds
// records above the cut keeps them on disk: they must never be appended
// after (the next epoch's packets go to a fresh store). The store is
// synced first (unless an fsync is out). From then on the Core takes no
// frame.
func (c *Core) Takeover(cut uint64) (*sequencer.State, error) {
	switch {
	case c.taken:
		return nil, ErrTakenOver
	case c.held() < cut:
		return nil, fmt.Errorf("%w: holds up to %d, cut %d", ErrBehindCut, c.held(), cut)
	}
	st := c.state
	if st.LastSeq() > cut {
		// Rebuild from the newest snapshot at or below the cut.
		i := len(c.snaps) - 1
		for c.snaps[i].seq > cut {
			i--
		}
		st = sequencer.NewState(c.cfg.MaxSenders, 1)
		if err := st.Restore(c.snaps[i].snap); err != nil {
			return nil, fmt.Errorf("standby: takeover at %d: restore the snapshot at %d: %w", cut, c.snaps[i].seq, err)
		}
	}
	if err := c.applyStore(st, cut); err != nil {
		return nil, fmt.Errorf("standby: takeover at %d: %w", cut, err)
	}
	if st.LastSeq() != cut {
		return nil, fmt.Errorf("%w: the state reached %d, cut %d", ErrBehindCut, st.LastSeq(), cut)
	}
	if !c.syncOut {
		if err := c.store.Sync(); err != nil {
			return nil, fmt.Errorf("standby: takeover at %d: %w", cut, err)
		}
	}
	c.taken, c.takenCut = true, cut
	// What the store holds above the cut is never the stream's: no file
	// may describe it at the next open.
	c.dropDiskSnapsAbove(cut)
	return st, nil
}

// PutOwn stores a packet the primary that took the store over published
// (its History's Put): once one is stored, the store's tail above the
// cut is the primary's own epoch and FetchRange serves it.
func (c *Core) PutOwn(pkt []byte, info sequencer.PacketInfo) {
	before, _ := c.store.Newest()
	c.store.Put(pkt, info)
	if after, ok := c.store.Newest(); ok && c.taken && after != before && after.FirstSeq > c.takenCut {
		c.ownPut = true
	}
}

// applyStore applies the store's records after st's position up to
// to (a fragmented message once, at its first fragment).
func (c *Core) applyStore(st *sequencer.State, to uint64) error {
	if st.LastSeq() >= to {
		return nil
	}
	var err error
	c.store.Records(st.LastSeq()+1, to, func(r *wire.Record, _ uint32) bool {
		if r.Seq != st.LastSeq()+1 {
			return true // a later fragment of a message applied
		}
		err = c.apply(st, r)
		return err == nil
	})
	return err
}

// Close closes the store (after Run returned). A store handed over by
// Takeover is the primary's to keep: close it when the primary is done.
func (c *Core) Close() error {
	return c.store.Close()
}

// FetchRange appends to dst, as fetch answer frames, the stored packets
// that carry records of from..to (see cluster.FetchSource), nothing above
// what the store holds of the stream (nor above a Takeover's cut).
func (c *Core) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	held := c.held()
	if c.taken && !c.ownPut {
		// Records above the cut, if the store holds any, belong to no
		// stream: the new epoch replaced them. Once the primary wrote
		// its first packet (at the cut + 1) the tail is its own epoch,
		// which it serves as any member does (a deposed primary still
		// running is the best fetch source of its epoch).
		held = min(held, c.takenCut)
	}
	if from > held || from > to {
		return dst, from, true, held, nil
	}
	to = min(to, held)
	next, full := from, false
	c.store.Range(from, to, func(pkt []byte, info sequencer.PacketInfo) bool {
		var hdr [wire.PeerFrameHeaderBytes]byte
		wire.PutPeerFrameHeader(hdr[:], wire.PeerPacket, len(pkt))
		dst = append(append(dst, hdr[:]...), pkt...)
		if wire.DecodePacket(pkt, &c.pkt) != nil {
			return false
		}
		var r wire.Record
		whole := true
		for c.pkt.Next(&r) {
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
	if err := c.store.Err(); err != nil {
		return dst, next, true, held, err
	}
	return dst, next, !full || next > to, held, nil
}

// Step takes one stream frame at now: the receiver's output is acted on
// at once (persist, then the NAKs queued for Ready, then deliver). A
// frame of a sealed epoch is dropped; after a fatal error or the
// Takeover every frame is.
func (c *Core) Step(now int64, f []byte) {
	if c.err != nil || c.taken {
		return
	}
	if c.sealed != 0 && c.sealedFrame(f) {
		return
	}
	if !c.r.Started() && c.staleTail(f) && c.heal(now, f) {
		return
	}
	if c.r.Step(now, f, receiver.Sequencer) != nil && c.r.Err() == nil {
		c.stats.ReceiverErrs++
	}
	if err := c.r.Err(); err == nil || !errors.Is(err, receiver.ErrDiverged) || !c.heal(now, f) {
		c.handleReady(now)
	}
	if c.cfg.AckEveryBytes > 0 && c.err == nil && c.store.Stats().AppendedBytes-c.ackBytes >= uint64(c.cfg.AckEveryBytes) {
		c.ackEarly(now)
	}
}

// ackEarly acks in the middle of a batch of frames (AckEveryBytes):
// what was appended reaches the OS first (a written ack never names a
// seq the store only buffers), then Ack decides as at the end of a turn.
func (c *Core) ackEarly(now int64) {
	if err := c.store.Tick(now); err != nil {
		c.fail(fmt.Errorf("standby: member %d: store: %w", c.cfg.Member, err))
		return
	}
	c.ackBytes = c.store.Stats().AppendedBytes // at most one try per AckEveryBytes
	if c.ackOut == nil {
		c.Ack(now)
	}
}

// restartReceiver: when CatchUp filled the store before the
// receiver saw its first frame, the receiver repairs from the store's new
// end instead of the old one.
func (c *Core) restartReceiver() error {
	if c.r.Started() || c.rcfg.RewindFrom == c.store.Contiguous()+1 {
		return nil
	}
	c.rcfg.RewindFrom = c.store.Contiguous() + 1
	c.rcfg.RewindEpoch, _ = c.store.EpochOf(c.store.Contiguous())
	r, err := receiver.New(c.rcfg)
	if err != nil {
		return err
	}
	c.r = r
	return nil
}
