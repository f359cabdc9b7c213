package node

import (
	"crypto/tls"
	"fmt"
	"math"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// Archive is a session directory opened for replay: the stream a
// replayer wrote, read back through a node's receiving code so that a
// Handler sees exactly what a live node delivered (DESIGN.md, guarantee
// 6). It reads the directory without changing it (replayer.OpenArchive),
// so a live replayer's directory can be replayed too.
//
// An Archive is used by one goroutine at a time.
type Archive struct {
	s   *replayer.Store
	rec *replayer.Recovery
	// allStable: a replayer wrote the directory, so every record is
	// stable whatever the headers' stable says (replayer.StableName).
	allStable bool
}

// OpenArchive opens the session directory dir for replay. A torn tail or
// a corruption is no error here: Recovery says what was found, and Replay
// fails when the range it is asked for reaches past it.
func OpenArchive(dir string) (*Archive, error) {
	s, rec, err := replayer.OpenArchive(dir)
	if err != nil {
		return nil, err
	}
	return &Archive{s: s, rec: rec, allStable: replayer.AllStable(dir)}, nil
}

// Close releases the archive's files.
func (a *Archive) Close() error { return a.s.Close() }

// Recovery is what opening the archive found (torn tail, corruption).
func (a *Archive) Recovery() *replayer.Recovery { return a.rec }

// Session is the archive's session id (0 when it holds nothing).
func (a *Archive) Session() uint64 { return a.s.Session() }

// Seqs is the range of seqs the archive serves: first..last (0, 0 when
// empty).
func (a *Archive) Seqs() (first, last uint64) {
	o, ok := a.s.Oldest()
	if !ok {
		return 0, 0
	}
	first = o.FirstSeq
	if o.Fragment && o.FragFrom > 0 {
		first++ // the oldest packet starts inside a message: not whole
	}
	return first, a.s.Contiguous()
}

// Epochs is the archive's epoch table (where each epoch starts).
func (a *Archive) Epochs() []replayer.Epoch { return a.s.Epochs() }

// ReplayStats describes one Replay.
type ReplayStats struct {
	Messages uint64 // messages handed to OnMessage
	First    uint64 // seq of the first message delivered (0: none)
	Last     uint64 // seq of the last message delivered (0: none)
	Packets  uint64 // stored packets read
}

// ReplayOption tunes a Replay.
type ReplayOption func(*replayOptions)

type replayOptions struct {
	account    string
	instance   uint8
	stableOnly bool
	cfg        func(*Config)
	every      uint64
	progress   func(delivered uint64)
	until      func() bool
	tls        *tls.Config
}

// ReplayAccount makes Message.Mine (and the OnActivated, OnDeactivated
// and OnTimer callbacks) relative to account and instance, as for a live
// node of that identity.
func ReplayAccount(account string, instance uint8) ReplayOption {
	return func(o *replayOptions) { o.account, o.instance = account, instance }
}

// ReplayStableOnly stops at the highest seq the stored packets say was
// stable. By default the newest epoch the archive holds is replayed to
// its end: stable advances reach receivers in heartbeats, which are not
// stored, and no later epoch can cut what a finished session holds. Use
// it on the directory of a live session, whose newest records a failover
// may still cut.
func ReplayStableOnly() ReplayOption {
	return func(o *replayOptions) { o.stableOnly = true }
}

// ReplayConfig adjusts the node Config the replay runs with (limits such
// as MaxReceiveMessageBytes or PendingRecords); Account, Instance,
// ReadOnly, Rewind, RewindFrom, Mode and Session are the replay's own.
func ReplayConfig(fn func(*Config)) ReplayOption {
	return func(o *replayOptions) { o.cfg = fn }
}

// ReplayProgress calls fn with the last seq delivered after about every
// `every` messages, and once at the end: for a progress display.
func ReplayProgress(every uint64, fn func(delivered uint64)) ReplayOption {
	return func(o *replayOptions) { o.every, o.progress = max(every, 1), fn }
}

// ReplayTLS makes ReplayRemote dial the replayer over TLS with c (a
// replayer that serves rewinds with the security.tls-* keys).
func ReplayTLS(c *tls.Config) ReplayOption {
	return func(o *replayOptions) { o.tls = c }
}

// ReplayUntil ends the replay early, without error, once done reports
// true (asked after each stored packet, so a few more messages may come):
// for a reader that stops after a count, or on a signal.
func ReplayUntil(done func() bool) ReplayOption {
	return func(o *replayOptions) { o.until = done }
}

// Replay runs the archived stream of seqs from..to (from 0: the
// archive's first seq, which is above 1 for a replayer that started from
// the live tail; to 0: to the end)
// through h, at full speed, as a read-only node would have received it
// live: the same Core and receiver deliver each message once, in order,
// whole (fragments reassembled), with its Seq, Time, Epoch and, relative
// to the ReplayAccount, Mine; internal messages and the optional
// callbacks (OnActivated, OnDeactivated, OnTimer, OnRejected) come as
// live. Records a deposed primary published above its epoch's cut are
// dropped as a live receiver drops them. Local timers do not run (they
// are not part of the stream). It allocates nothing per message.
//
// It fails, after delivering everything before it, when the range
// reaches a corrupt record (the error wraps replayer.ErrCorrupt and
// names its seq) or past the end of the archive (ErrArchiveRange), and
// with the node's fatal errors (ErrTooLargeReceived, ...).
func (a *Archive) Replay(from, to uint64, h Handler, opts ...ReplayOption) (ReplayStats, error) {
	var o replayOptions
	for _, fn := range opts {
		fn(&o)
	}
	first, last := a.Seqs()
	if from == 0 {
		from = max(first, 1)
	}
	if to == 0 {
		to = math.MaxUint64
	}
	if from > to {
		return ReplayStats{}, fmt.Errorf("%w: from %d is past to %d", ErrArchiveRange, from, to)
	}
	if last == 0 || from < first || from > last {
		return ReplayStats{}, a.rangeError(from, to, first, last)
	}
	cfg := DefaultConfig()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	cfg.Account, cfg.Instance = o.account, o.instance
	cfg.ReadOnly, cfg.Mode, cfg.Session = true, Safe, a.s.Session()
	cfg.Rewind, cfg.RewindFrom = true, from
	cfg.StatusInterval = 0
	cfg.SilenceTimeout = 0 // a replay has no live stream to fall silent
	r := &replay{h: h, to: to, o: &o}
	r.act, _ = h.(ActivationHandler)
	r.tim, _ = h.(TimerHandler)
	r.rej, _ = h.(RejectionHandler)
	core, err := NewCore(cfg, r, replayOutput{})
	if err != nil {
		return ReplayStats{}, err
	}
	r.core = core
	r.next = o.every
	a.s.Range(from, last, r.onPacket)
	if r.stopped {
		if o.progress != nil {
			o.progress(r.stats.Last)
		}
		return r.stats, r.err
	}
	stableOnly := o.stableOnly && !a.allStable
	if r.err == nil && core.Delivered() < min(to, last) && !stableOnly {
		// The end of the archive: the newest epoch it holds is final.
		r.end(a.s)
	}
	if r.err == nil {
		r.err = core.Err()
	}
	if o.progress != nil {
		o.progress(r.stats.Last)
	}
	if r.err != nil {
		return r.stats, r.err
	}
	if c := a.s.Corruption(); c != nil && c.Seq <= to {
		return r.stats, fmt.Errorf("node: replay %d..%s: nothing from seq %d on is served: %w", from, upTo(to), c.Seq, c)
	}
	want := min(to, last)
	if stableOnly {
		want = min(want, core.Stable())
	}
	if core.Delivered() < want {
		return r.stats, fmt.Errorf("%w: replay %d..%s stopped after seq %d of %d", ErrArchiveRange, from, upTo(to), core.Delivered(), want)
	}
	if to != math.MaxUint64 && to > last {
		return r.stats, a.rangeError(from, to, first, last)
	}
	return r.stats, nil
}

// Replay opens the archive in dir, replays seqs from..to (0: the
// archive's first, its end) through h (see Archive.Replay) and closes it.
func Replay(dir string, from, to uint64, h Handler, opts ...ReplayOption) error {
	a, err := OpenArchive(dir)
	if err != nil {
		return err
	}
	defer a.Close()
	_, err = a.Replay(from, to, h, opts...)
	return err
}

// upTo prints the end of a replay range.
func upTo(to uint64) string {
	if to == math.MaxUint64 {
		return "the end"
	}
	return fmt.Sprint(to)
}

func (a *Archive) rangeError(from, to, first, last uint64) error {
	want := upTo(to)
	held := "nothing"
	if last > 0 {
		held = fmt.Sprintf("seqs %d..%d", first, last)
	}
	err := fmt.Errorf("%w: asked for %d..%s, the archive holds %s", ErrArchiveRange, from, want, held)
	if c := a.s.Corruption(); c != nil {
		err = fmt.Errorf("%w (%w)", err, c)
	}
	return err
}

// replay is the state of one Archive.Replay: the Core's Handler (it stops
// at to and forwards the optional callbacks) and the packet feed. Its
// methods are built once per Replay, so the walk allocates nothing.
type replay struct {
	h       Handler
	act     ActivationHandler
	tim     TimerHandler
	rej     RejectionHandler
	core    *Core
	to      uint64
	o       *replayOptions
	next    uint64 // Messages count of the next progress call
	cur     uint64 // seq of the message being delivered
	err     error
	stopped bool // ReplayUntil ended it
	stats   ReplayStats
	hb      [wire.PacketHeaderBytes]byte
}

// onPacket steps one stored packet into the Core.
func (r *replay) onPacket(pkt []byte, _ sequencer.PacketInfo) bool {
	// A repair a replayer stored carries the retransmit flag; the stream
	// it belongs to is what the node must see.
	wire.SetPacketFlags(pkt, 0)
	r.stats.Packets++
	if err := r.core.Step(0, pkt); err != nil && r.core.Err() != nil {
		r.err = r.core.Err()
		return false
	}
	if r.o.progress != nil && r.stats.Messages >= r.next {
		r.next = r.stats.Messages + r.o.every
		r.o.progress(r.stats.Last)
	}
	if r.o.until != nil && r.o.until() {
		r.stopped = true
		return false
	}
	return r.core.Delivered() < r.to
}

// end makes the rest of the newest epoch stable with a heartbeat, as the
// sequencer's would have.
func (r *replay) end(s *replayer.Store) {
	eps := s.Epochs()
	e := eps[len(eps)-1]
	last := s.Contiguous()
	hb, err := wire.AppendHeartbeat(r.hb[:], e.Epoch, s.Session(), last+1, last, 0, e.Start)
	if err != nil {
		r.err = err
		return
	}
	if err := r.core.Step(0, hb); err != nil && r.core.Err() != nil {
		r.err = r.core.Err()
	}
}

func (r *replay) OnMessage(m *Message) {
	r.cur = m.Seq
	if m.Seq > r.to {
		return
	}
	if r.stats.First == 0 {
		r.stats.First = m.Seq
	}
	r.stats.Last = m.Seq
	r.stats.Messages++
	r.h.OnMessage(m)
}

func (r *replay) OnActivated() {
	if r.act != nil && r.cur <= r.to {
		r.act.OnActivated()
	}
}

func (r *replay) OnDeactivated() {
	if r.act != nil && r.cur <= r.to {
		r.act.OnDeactivated()
	}
}

func (r *replay) OnTimer(id uint64, scheduled int64) {
	if r.tim != nil && r.cur <= r.to {
		r.tim.OnTimer(id, scheduled)
	}
}

func (r *replay) OnRejected(cmdSeq uint64, err error) {
	if r.rej != nil && r.cur <= r.to {
		r.rej.OnRejected(cmdSeq, err)
	}
}

// replayOutput is the Output of a replay: a read-only node sends nothing but
// NAKs, and an archive has no gaps to ask for.
type replayOutput struct{}

func (replayOutput) Send([]byte) {}
