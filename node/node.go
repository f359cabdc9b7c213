package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/seqd/seqd/internal/agent"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// maxPollWait bounds how long Run waits in Poll, and so how late a due
// timer, or a command queued by another goroutine over a transport that
// cannot be woken (transport.Waker), can be.
const maxPollWait = time.Millisecond

type opKind uint8

const (
	opSend opKind = iota
	opTimer
	opCancelTimer
	opLocalTimer
	opControl
)

// op is a request from any goroutine, applied to the Core by Run.
type op struct {
	kind   opKind
	id     uint64
	at     int64
	period int64
	after  time.Duration
	off, n int // payload in opBytes
	// hotID is a hot-hot send's id, stamped when it was queued (inside
	// the handler call it reacts to); flags its command flags (CmdOOB).
	hotID uint64
	flags uint8
	// ctl is an opControl's request.
	ctlOp   uint8
	ctlInst uint8
	ctlAcct uint64
}

// Node runs a Core over a transport.Client. Only the Run goroutine touches
// the Core and the client; other goroutines (and callbacks) hand requests
// to it through a small mutex-guarded queue, so nothing can deadlock on
// re-entry and the client is used by one goroutine as transports require.
type Node struct {
	cfg Config
	// dropped logs, rate-limited, packets the receiver dropped as
	// another session's or of an epoch no failover could have made.
	dropped transport.RateLog
	client  transport.Client
	core    *Core
	user    Handler
	start   time.Time
	onRecv  transport.Handler // method value built once
	spin    time.Duration     // SetIdleSpin
	run     *agent.Runner     // Run's loop: idling, yielding, the clock
	admin   adminActions      // AddAdminAction (admin.go)
	turns   uint64            // loop turns that published (under mu; Stats.Turns)
	waker   transport.Waker   // the client's, if it has one
	// rewindPending: the rewind opens once the first live packet fixed
	// the session (Run goroutine only).
	rewindPending bool
	// sourcer and peers reach Config.Replayers: peers[i] is the Peer of
	// receiver.Source i+1.
	sourcer transport.Sourcer
	peers   []transport.Peer
	// polling is true while Run may be blocked in Poll: the first command
	// queued from another goroutine then wakes it (and clears polling, so
	// the Sends after it do not wake it again) rather than wait out the
	// Poll.
	polling atomic.Bool

	// Run goroutine only: the local clock, read once per loop iteration
	// (by the first frame of a Poll, or after it, and every
	// framesPerClock frames of a long Poll) rather than per frame.
	clock    func() int64
	now      int64
	nowValid bool
	nowUses  int // frames stepped at now

	// Rewind (rewind.go): the replayer's address, the open stream (Run
	// goroutine only) and its mirror.
	rewindAddrs    []string
	rewindIdx      int    // address in use
	rewindFails    int    // failed rewinds since rewindProgress
	rewindProgress uint64 // next seq to deliver at the last failure
	rewindSince    time.Time
	rewindSrc      RewindSource
	rewindFailover atomic.Uint64
	rw             *rewindStream
	rewindOpen     atomic.Bool

	// Mirrors of Core state for other goroutines; written by Run (during
	// delivery, before each callback, so callbacks see the current value).
	// They sit on their own cache line, away from mu and the queue that
	// sending goroutines write: a store per delivered message to a line
	// they keep taking cost a node 8% of its CPU. Rewinding and the
	// incarnation rarely change: Run stores them only when they do
	// (lastRewinding and lastIncarnation are its own copies).
	_               [64]byte
	seqNow          atomic.Int64
	rewinding       atomic.Bool
	incarnation     atomic.Uint64
	timeKnown       atomic.Bool // Core.TimeKnown, stored once when it turns true
	lastRewinding   bool
	lastIncarnation uint64
	lastTimeKnown   bool
	active          atomic.Bool // Core.Active (hot-hot)
	lastActive      bool
	// cbOrigin is the seq whose delivery runs a callback now (hot-hot
	// only; 0 outside one): a send queued meanwhile is numbered from it.
	cbOrigin atomic.Uint64
	_        [64]byte

	// space is signalled (without blocking: it holds one token) when
	// window space frees and a Send waits; done is closed when Run ends.
	space chan struct{}
	done  chan struct{}

	// mu guards everything below; it is never held while the Core runs.
	mu         sync.Mutex
	ops        []op
	opBytes    []byte
	spareOps   []op
	spareBytes []byte
	nextCmd    uint64 // cmdSeq of the next command admitted: the Core numbers them in the same order
	// Hot-hot numbering: the origin of the last send queued and how many
	// sends it made.
	hotOrigin uint64
	hotSends  uint64
	queued    int // commands in ops
	queuedB   int // their payload bytes
	inflight  int // Core.InFlight after Run last looked
	inflightB int // Core.InFlightBytes after Run last looked
	waiters   int // Sends waiting for space
	stats     Stats
	ended     bool
	doneErr   error
	sendErr   error // first error from client.Send
}

// New builds a Node for client. With Config.Incarnation 0 it takes the
// wall clock in ns, which grows across restarts.
func New(cfg Config, h Handler, client transport.Client) (*Node, error) {
	if cfg.Incarnation == 0 {
		cfg.Incarnation = uint64(time.Now().UnixNano())
	}
	n := &Node{cfg: cfg, client: client, user: h, start: time.Now(), nextCmd: 1,
		space: make(chan struct{}, 1), done: make(chan struct{})}
	n.clock = n.monotonic
	if len(cfg.Replayers) > 0 {
		src, ok := client.(transport.Sourcer)
		if !ok {
			return nil, fmt.Errorf("%w: Replayers need a transport that can address repair sources (transport.Sourcer)", ErrConfig)
		}
		n.sourcer = src
		for _, a := range cfg.Replayers {
			p, err := src.AddSource(a)
			if err != nil {
				return nil, fmt.Errorf("%w: replayer %s: %w", ErrConfig, a, err)
			}
			n.peers = append(n.peers, p)
		}
	}
	var sh Handler = shellHandler{n: n}
	if _, ok := h.(OOBHandler); ok {
		sh = shellOOBHandler{shellHandler{n: n}}
	}
	core, err := NewCore(cfg, sh, shellOutput{n: n})
	if err != nil {
		return nil, err
	}
	n.core = core
	n.onRecv = n.receive
	n.waker, _ = client.(transport.Waker)
	n.lastRewinding, n.lastIncarnation = core.Rewinding(), core.Incarnation()
	n.rewinding.Store(n.lastRewinding)
	n.incarnation.Store(n.lastIncarnation)
	return n, nil
}

// SetIdleSpin makes Run poll without blocking for d after each frame
// (see transport.Idle): lower latency for a busy core. Call it before Run.
func (n *Node) SetIdleSpin(d time.Duration) { n.spin = d }

// Run drives the node until ctx is done or the core stops with a fatal
// error (ErrUnrecoverable, ErrDiverged, ErrSuperseded, ...), which it
// returns; a transport error is returned too. Handler callbacks run on
// this goroutine.
func (n *Node) Run(ctx context.Context) error {
	cfg := agent.DefaultConfig()
	cfg.Spin, cfg.Clock = n.spin, n.tick
	if n.waker == nil {
		cfg.MaxWait = maxPollWait
	}
	r, err := agent.NewRunner(cfg)
	if err != nil {
		return n.finish(err)
	}
	n.run = r
	// The rewind opens once the first live packet fixed the session (the
	// request names it, so a replayer of another session refuses instead
	// of streaming packets this node would fence).
	n.rewindPending = n.cfg.Rewind && len(n.rewindAddrs) > 0 && n.rw == nil && !n.core.RewindCaughtUp()
	defer n.closeRewind()
	return n.finish(r.Run(ctx, n))
}

// Poll steps the frames that come within wait into the core
// (agent.Agent). Before a Poll that may block it makes sure no command
// queued by another goroutine, and no rewind chunk, waits unseen.
func (n *Node) Poll(wait time.Duration) (int, error) {
	n.nowValid = false // the batch's frames read the clock afresh
	if wait > 0 {
		// polling is set before ops is checked, and Send appends to
		// ops before it reads polling: either Run sees the op, or
		// Send sees polling and wakes the Poll. A Poll that does
		// not block needs no wake.
		n.polling.Store(true)
		n.mu.Lock()
		if len(n.ops) > 0 {
			wait = 0
		}
		n.mu.Unlock()
		// Likewise a rewind chunk pushed before polling was set.
		if n.rw != nil && n.core.Started() && (n.rw.ready() || len(n.rw.errc) > 0) {
			wait = 0
		}
	}
	got, err := n.client.Poll(n.onRecv, wait)
	n.polling.Store(false)
	return got, err
}

// DoWork opens or pumps the rewind, applies the queued requests, ticks
// the core, hands its output to the client and flushes it (agent.Agent);
// a fatal core error, a closed transport or a failed send ends Run.
func (n *Node) DoWork(now int64) (int, error) {
	n.nowValid = false
	if n.rewindPending && n.core.Started() {
		n.rewindPending = false
		if !n.core.RewindCaughtUp() {
			n.openRewind()
		}
	}
	if n.rw != nil {
		if err := n.pumpRewind(now); err != nil {
			return 0, err
		}
	}
	n.applyOps(now)
	n.core.Tick(now)
	n.publish()
	if err := n.core.Err(); err != nil {
		return 0, err
	}
	// Only a closed transport is fatal: anything else a Flush reports
	// is loss, which the transport counts and the protocol repairs
	// (commands are resent until acked).
	if err := n.client.Flush(); errors.Is(err, transport.ErrClosed) {
		return 0, err
	}
	n.mu.Lock()
	err := n.sendErr
	n.mu.Unlock()
	return 0, err
}

func (n *Node) monotonic() int64 { return int64(time.Since(n.start)) }

// framesPerClock bounds how many frames of one long Poll share a clock
// read, so that ack latencies measured across a Poll stay true.
const framesPerClock = 16

// tick returns the local clock of this loop iteration, reading it only
// the first time (and again every framesPerClock frames).
func (n *Node) tick() int64 {
	if !n.nowValid || n.nowUses >= framesPerClock {
		n.now = n.clock()
		n.nowValid = true
		n.nowUses = 0
	}
	n.nowUses++
	return n.now
}

// maxIdleWait bounds a Poll of Run when the core has no timed work due
// sooner (a node hears heartbeats far more often anyway), so that timed
// work NextDue does not know of costs at most this much delay.
const maxIdleWait = agent.DefaultMaxWait

// NextDue is the core's next timed work (a NAK, a resend, a local timer,
// the command frame's flush delay), as the runner's clock reads it
// (agent.Agent); due now when the core has failed. The runner waits at
// most maxIdleWait; commands from other goroutines wake the Poll
// (transport.Waker). Over a client that cannot be woken it reports
// nothing, and the runner keeps to maxPollWait. An idle node then wakes
// for the stream's heartbeats only, not every millisecond. It reads the
// Core's fields (same package) and allocates nothing.
func (n *Node) NextDue() (int64, bool) {
	if n.waker == nil {
		return 0, false
	}
	c := n.core
	now := n.run.Now()
	if c.err != nil {
		return now, true
	}
	due := now + int64(maxIdleWait)
	if at, ok := c.r.NextDue(); ok {
		due = min(due, at)
	}
	if at, ok := c.resendDue(); ok {
		due = min(due, at)
	}
	for i := range c.localTimers {
		due = min(due, c.localTimers[i].at)
	}
	if c.frameOpen {
		due = min(due, c.frameSince+int64(c.cfg.FlushDelay))
	}
	if at, ok := c.silenceDue(); ok {
		due = min(due, at)
	}
	if at, ok := c.hotDue(); ok {
		due = min(due, at)
	}
	return due, true
}

// receive is the transport handler: one frame into the Core. Malformed
// frames are counted by the Core and otherwise ignored.
//
// A frame in hand means Poll waits no more (it waits only for the first
// frame), so polling is cleared here: a command sent from a callback on
// this goroutine, or from another one meanwhile, is applied when this Poll
// returns and needs no wake (an eventfd write and a read, per message of
// an rtt node).
func (n *Node) receive(frame []byte, from transport.Peer) {
	if n.polling.Load() {
		n.polling.Store(false)
	}
	now := n.tick()
	src := receiver.Sequencer
	for i, p := range n.peers {
		if p == from {
			src = receiver.Source(i + 1)
			break
		}
	}
	if err := n.core.StepFrom(now, frame, src); err != nil && (errors.Is(err, receiver.ErrOtherSession) || errors.Is(err, receiver.ErrEpochJump)) {
		n.dropped.Msg = "node: stream packets dropped (another session, or an epoch far beyond the current one)"
		n.dropped.Note(1, err)
	}
	n.applyOps(now) // commands sent by callbacks go out with this batch
	n.publish()
}

// applyOps moves queued requests into the Core (Run goroutine only).
func (n *Node) applyOps(now int64) {
	n.mu.Lock()
	if len(n.ops) == 0 {
		n.mu.Unlock()
		return
	}
	ops, b := n.ops, n.opBytes
	n.ops, n.opBytes = n.spareOps[:0], n.spareBytes[:0]
	n.mu.Unlock()
	applied, appliedB := 0, 0
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opSend:
			if o.hotID != 0 {
				// Not admitted against the window: the core's backlog
				// takes it.
				_, _ = n.core.sendHot(now, o.hotID, o.flags, b[o.off:o.off+o.n])
				continue
			}
			// The shell admitted it against the same window the core
			// keeps, so the core accepts it, with the number the
			// shell gave it.
			_, _ = n.core.enqueue(now, b[o.off:o.off+o.n], o.flags, 0, 0)
			applied++
			appliedB += o.n
		case opControl:
			_, _ = n.core.Control(now, o.ctlOp, wire.Account(o.ctlAcct), o.ctlInst)
			applied++
		case opTimer:
			_ = n.core.SendTimer(now, o.id, o.at, o.period)
			applied++
		case opCancelTimer:
			_ = n.core.CancelTimer(now, o.id)
			applied++
		case opLocalTimer:
			n.core.SetLocalTimer(now, o.id, o.after)
		}
	}
	// Until now the applied commands counted as queued; they count as in
	// flight from here, so a concurrent Send never overfills the window.
	n.mu.Lock()
	n.queued -= applied
	n.queuedB -= appliedB
	n.inflight = n.core.InFlight()
	n.inflightB = n.core.InFlightBytes()
	n.spareOps, n.spareBytes = ops[:0], b[:0]
	n.mu.Unlock()
}

// publish refreshes the mirrors other goroutines read.
func (n *Node) publish() {
	n.mirror()
	n.mu.Lock()
	inflight, inflightB := n.core.InFlight(), n.core.InFlightBytes()
	if n.waiters > 0 && (inflight < n.inflight || inflightB < n.inflightB) {
		n.signalSpace()
	}
	n.inflight, n.inflightB = inflight, inflightB
	n.turns++
	n.stats = n.core.Stats()
	n.stats.Turns = n.turns
	n.mu.Unlock()
}

// signalSpace hands one waiting Send the news that space freed; the
// channel holds one token, so it never blocks. The Send that takes it
// passes it on if space remains.
func (n *Node) signalSpace() {
	select {
	case n.space <- struct{}{}:
	default:
	}
}

func (n *Node) finish(err error) error {
	n.mu.Lock()
	if !n.ended {
		n.ended = true
		n.doneErr = err
		close(n.done)
	}
	n.mu.Unlock()
	return err
}

// Send queues payload (copied) as the next command and returns its
// cmdSeq (commands are numbered 1, 2, ... in the order Send, TrySend and
// the timer calls accept them; OnRejected names that number). Safe from
// any goroutine. A full window returns ErrWindowFull, or with
// BlockWhenFull waits for space, at most SendTimeout (then
// ErrWindowFull), or until Run ends (its error). Handler callbacks must
// use TrySend instead: only the Run goroutine, which runs them, frees
// space, so a callback's Send could only wait out its deadline.
func (n *Node) Send(p []byte) (uint64, error) {
	if !n.cfg.BlockWhenFull {
		return n.enqueue(nil, 0, op{kind: opSend}, p, true)
	}
	return n.enqueue(nil, n.cfg.SendTimeout, op{kind: opSend}, p, true)
}

// TrySendOOB is TrySend for an out-of-band command (Core.SendOOB).
func (n *Node) TrySendOOB(p []byte) (uint64, error) {
	return n.enqueue(nil, 0, op{kind: opSend, flags: wire.CmdOOB}, p, true)
}

// Activate asks the sequencer, by a command, to make instance of account
// the active instance of its hot-hot account (Core.Control); the switch
// comes in the stream. Like TrySend it never waits.
func (n *Node) Activate(account string, instance uint8) (uint64, error) {
	return n.control(wire.ControlActivate, account, instance)
}

// ForcePassive asks the sequencer to make instance of account passive,
// its live partner taking over (Core.Control).
func (n *Node) ForcePassive(account string, instance uint8) (uint64, error) {
	return n.control(wire.ControlForcePassive, account, instance)
}

func (n *Node) control(opc uint8, account string, instance uint8) (uint64, error) {
	a, err := wire.ParseAccount(account)
	if err != nil {
		return 0, fmt.Errorf("%w: account %q", err, account)
	}
	return n.enqueue(nil, 0, op{kind: opControl, ctlOp: opc, ctlInst: instance, ctlAcct: uint64(a)}, nil, true)
}

// Active reports whether this node is the active instance of its hot-hot
// account, as the stream delivered so far says (Core.Active).
func (n *Node) Active() bool { return n.active.Load() }

// SendString is Send for a string, without converting it to a slice.
func (n *Node) SendString(s string) (uint64, error) {
	return n.Send(unsafe.Slice(unsafe.StringData(s), len(s))) // read only: copied by enqueue
}

// SendContext is Send that waits for window space until ctx is done
// (then ctx's error) or Run ends, whatever BlockWhenFull says.
func (n *Node) SendContext(ctx context.Context, p []byte) (uint64, error) {
	return n.enqueue(ctx, 0, op{kind: opSend}, p, true)
}

// TrySend is Send that never waits: a full window returns ErrWindowFull
// at once. Handler callbacks send with it; another goroutine may too.
func (n *Node) TrySend(p []byte) (uint64, error) {
	return n.enqueue(nil, 0, op{kind: opSend}, p, true)
}

// TrySendString is TrySend for a string, without converting it to a slice.
func (n *Node) TrySendString(s string) (uint64, error) {
	return n.TrySend(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// SetTimer schedules centralized timer id at sequencer time Now()+after;
// it fires through OnTimer at the same point of the stream everywhere.
// The request is a command (it returns its cmdSeq) and, like TrySend,
// never waits: a full window returns ErrWindowFull. Sequencer time comes
// from the stream: before the first message (or heartbeat) there is none,
// and SetTimer returns ErrTimeUnknown rather than ask for a time in 1970,
// which would fire at once.
func (n *Node) SetTimer(id uint64, after time.Duration) (uint64, error) {
	if !n.timeKnown.Load() {
		return 0, fmt.Errorf("%w: timer %d", ErrTimeUnknown, id)
	}
	return n.enqueue(nil, 0, op{kind: opTimer, id: id, at: n.Now() + int64(after)}, nil, true)
}

// SetPeriodicTimer schedules centralized timer id at sequencer time at,
// then every period (see SetTimer). A negative period returns ErrTimer
// and uses no command seq.
func (n *Node) SetPeriodicTimer(id uint64, at int64, period time.Duration) (uint64, error) {
	if period < 0 {
		return 0, fmt.Errorf("%w: timer %d: period %v, want >= 0 (0: once)", ErrTimer, id, period)
	}
	return n.enqueue(nil, 0, op{kind: opTimer, id: id, at: at, period: int64(period)}, nil, true)
}

// CancelTimer cancels centralized timer id (see SetTimer).
func (n *Node) CancelTimer(id uint64) (uint64, error) {
	return n.enqueue(nil, 0, op{kind: opCancelTimer, id: id}, nil, true)
}

// SetLocalTimer calls OnLocalTimer(id) after the given local time.
func (n *Node) SetLocalTimer(id uint64, after time.Duration) {
	_, _ = n.enqueue(nil, 0, op{kind: opLocalTimer, id: id, after: after}, nil, false)
}

// timers are reused by blocking Sends, so waiting allocates nothing.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// enqueue admits a request against the window and queues it for Run. A
// full window waits when ctx is set (until it is done) or timeout > 0
// (then ErrWindowFull), else returns ErrWindowFull.
func (n *Node) enqueue(ctx context.Context, timeout time.Duration, o op, p []byte, command bool) (uint64, error) {
	if command {
		if n.cfg.ReadOnly {
			return 0, ErrReadOnly
		}
		if len(p) > n.cfg.MaxMessageBytes {
			return 0, ErrTooLarge
		}
		if n.cfg.HotHot && o.kind == opSend {
			return n.enqueueHot(o, p)
		}
		if n.cfg.HotHot && (o.kind == opTimer || o.kind == opCancelTimer) {
			return 0, ErrHotHotTimer
		}
	}
	var deadline *time.Timer
	var cancelled <-chan struct{}
	if ctx != nil {
		cancelled = ctx.Done()
	}
	n.mu.Lock()
	for {
		if n.ended {
			err := n.doneErr
			n.mu.Unlock()
			stopTimer(deadline)
			return 0, err
		}
		if !command || n.fits(len(p)) {
			break
		}
		if ctx == nil && timeout <= 0 {
			n.mu.Unlock()
			return 0, ErrWindowFull
		}
		if deadline == nil && timeout > 0 {
			deadline = timers.Get().(*time.Timer)
			deadline.Reset(timeout)
		}
		var timerC <-chan time.Time
		if deadline != nil {
			timerC = deadline.C
		}
		n.waiters++
		n.mu.Unlock()
		var err error
		select {
		case <-n.space:
		case <-n.done:
		case <-timerC:
			err = ErrWindowFull
		case <-cancelled:
			err = ctx.Err()
		}
		n.mu.Lock()
		n.waiters--
		if err != nil {
			n.mu.Unlock()
			stopTimer(deadline)
			return 0, err
		}
	}
	var seq uint64
	if command {
		seq = n.nextCmd
		n.nextCmd++
		n.queued++
		n.queuedB += len(p)
	}
	o.off, o.n = len(n.opBytes), len(p)
	n.opBytes = append(n.opBytes, p...)
	n.ops = append(n.ops, o)
	if n.waiters > 0 && n.fits(0) {
		n.signalSpace() // room for another: pass the signal on
	}
	n.mu.Unlock()
	stopTimer(deadline)
	// Wake a Run blocked in Poll, once: the Sends that follow before it
	// runs find polling cleared.
	if n.waker != nil && n.polling.CompareAndSwap(true, false) {
		n.waker.Wake()
	}
	return seq, nil
}

// enqueueHot queues a hot-hot send, numbered from the delivery whose
// callback runs now; outside one it fails with ErrNotFromStream. It never
// waits: the core's backlog takes it (HotHotBacklog).
func (n *Node) enqueueHot(o op, p []byte) (uint64, error) {
	origin := n.cbOrigin.Load()
	if origin == 0 {
		return 0, ErrNotFromStream
	}
	n.mu.Lock()
	if n.ended {
		err := n.doneErr
		n.mu.Unlock()
		return 0, err
	}
	if origin != n.hotOrigin {
		n.hotOrigin, n.hotSends = origin, 0
	}
	if n.hotSends >= maxSendsPerCall {
		n.mu.Unlock()
		return 0, ErrTooManySends
	}
	o.hotID = origin<<16 | n.hotSends
	n.hotSends++
	o.off, o.n = len(n.opBytes), len(p)
	n.opBytes = append(n.opBytes, p...)
	n.ops = append(n.ops, o)
	n.mu.Unlock()
	return o.hotID, nil
}

// fits reports whether a command of size payload bytes fits the window
// (n.mu held). One command always fits when nothing is in flight.
func (n *Node) fits(size int) bool {
	k := n.inflight + n.queued
	return k < n.cfg.Window && (k == 0 || n.inflightB+n.queuedB+size <= n.cfg.WindowBytes)
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
		timers.Put(t)
	}
}

// Now is sequencer time (see Core.Now); inside a callback, the time of the
// message being delivered.
func (n *Node) Now() int64 { return n.seqNow.Load() }

// Rewinding reports whether the node is still replaying history from
// before it joined (see Core.Rewinding).
func (n *Node) Rewinding() bool { return n.rewinding.Load() }

// InFlight is the number of commands queued or unacked.
func (n *Node) InFlight() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inflight + n.queued
}

// Stats returns the Core's counters as of Run's last step.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Incarnation is the incarnation in use: Config.Incarnation (picked by
// New when 0), or the one the Core moved to above an incarnation of this
// identity seen in the stream before its first command.
func (n *Node) Incarnation() uint64 { return n.incarnation.Load() }

// shellHandler forwards callbacks to the user's Handler, refreshing the
// mirrors first so that Node.Now and Node.Rewinding are current inside.
type shellHandler struct{ n *Node }

func (s shellHandler) OnMessage(m *Message) {
	s.n.mirror()
	if s.n.cfg.HotHot {
		s.n.cbOrigin.Store(m.Seq)
		s.n.user.OnMessage(m)
		s.n.cbOrigin.Store(0)
		return
	}
	s.n.user.OnMessage(m)
}

// shellOOBHandler is shellHandler for a user Handler that is an
// OOBHandler (only then does the Core look for out-of-band records).
type shellOOBHandler struct{ shellHandler }

func (s shellOOBHandler) OnOOB(m *Message) {
	s.n.mirror()
	s.n.user.(OOBHandler).OnOOB(m)
}

// enterStream and leaveStream bracket a callback for a stream record
// (hot-hot numbering: see cbOrigin).
func (s shellHandler) enterStream() {
	if s.n.cfg.HotHot {
		s.n.cbOrigin.Store(s.n.core.hh.origin)
	}
}

func (s shellHandler) leaveStream() {
	if s.n.cfg.HotHot {
		s.n.cbOrigin.Store(0)
	}
}

// mirror refreshes the mirrors of Core state (Run goroutine only).
func (n *Node) mirror() {
	n.seqNow.Store(n.core.Now())
	if !n.lastTimeKnown && n.core.TimeKnown() {
		n.lastTimeKnown = true
		n.timeKnown.Store(true)
	}
	if r := n.core.Rewinding(); r != n.lastRewinding {
		n.lastRewinding = r
		n.rewinding.Store(r)
	}
	if inc := n.core.Incarnation(); inc != n.lastIncarnation {
		n.lastIncarnation = inc
		n.incarnation.Store(inc)
	}
	if a := n.core.Active(); a != n.lastActive {
		n.lastActive = a
		n.active.Store(a)
	}
}

func (s shellHandler) OnStreamSilent(d time.Duration) {
	if h, ok := s.n.user.(SilenceHandler); ok {
		h.OnStreamSilent(d)
	}
}

func (s shellHandler) OnStreamResumed() {
	if h, ok := s.n.user.(SilenceHandler); ok {
		h.OnStreamResumed()
	}
}

func (s shellHandler) OnActivated() {
	s.n.mirror()
	if a, ok := s.n.user.(ActivationHandler); ok {
		s.enterStream()
		a.OnActivated()
		s.leaveStream()
	}
}

func (s shellHandler) OnDeactivated() {
	s.n.mirror()
	if a, ok := s.n.user.(ActivationHandler); ok {
		s.enterStream()
		a.OnDeactivated()
		s.leaveStream()
	}
}

func (s shellHandler) OnTimer(id uint64, scheduled int64) {
	if t, ok := s.n.user.(TimerHandler); ok {
		t.OnTimer(id, scheduled)
	}
}

func (s shellHandler) OnLocalTimer(id uint64) {
	if t, ok := s.n.user.(LocalTimerHandler); ok {
		t.OnLocalTimer(id)
	}
}

func (s shellHandler) OnRejected(cmdSeq uint64, err error) {
	if r, ok := s.n.user.(RejectionHandler); ok {
		s.enterStream()
		r.OnRejected(cmdSeq, err)
		s.leaveStream()
	}
}

// shellOutput hands the Core's frames to the client (Run goroutine only).
type shellOutput struct{ n *Node }

// SendTo sends a NAK to a replayer (SourceOutput); a send error is loss,
// as for any NAK, repaired by asking again.
func (o shellOutput) SendTo(src receiver.Source, frame []byte) {
	if i := int(src) - 1; i >= 0 && i < len(o.n.peers) {
		_ = o.n.sourcer.SendTo(o.n.peers[i], frame)
		return
	}
	o.Send(frame)
}

func (o shellOutput) Send(frame []byte) {
	if err := o.n.client.Send(frame); err != nil {
		o.n.mu.Lock()
		if o.n.sendErr == nil {
			o.n.sendErr = err
		}
		o.n.mu.Unlock()
	}
}
