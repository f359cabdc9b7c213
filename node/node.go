package node

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/seqd/seqd/transport"
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
)

// op is a request from any goroutine, applied to the Core by Run.
type op struct {
	kind   opKind
	id     uint64
	at     int64
	period int64
	after  time.Duration
	off, n int // payload in opBytes
}

// Node runs a Core over a transport.Client. Only the Run goroutine touches
// the Core and the client; other goroutines (and callbacks) hand requests
// to it through a small mutex-guarded queue, so nothing can deadlock on
// re-entry and the client is used by one goroutine as transports require.
type Node struct {
	cfg    Config
	client transport.Client
	core   *Core
	user   Handler
	start  time.Time
	onRecv transport.Handler // method value built once
	idle   transport.Idle    // Run goroutine only
	waker  transport.Waker   // the client's, if it has one
	// polling is true while Run may be blocked in Poll: a Send from
	// another goroutine then wakes it rather than wait out the Poll.
	polling atomic.Bool

	// Mirrors of Core state for other goroutines; written by Run (during
	// delivery, before each callback, so callbacks see the current value).
	now       atomic.Int64
	rewinding atomic.Bool
	inCore    atomic.Bool   // Run is inside the Core (callbacks may be running)
	runID     atomic.Uint64 // goroutine id of Run

	// mu guards everything below; it is never held while the Core runs.
	mu         sync.Mutex
	space      sync.Cond // signalled when window space frees or Run ends
	ops        []op
	opBytes    []byte
	spareOps   []op
	spareBytes []byte
	queued     int // commands in ops
	queuedB    int // their payload bytes
	inflight   int // Core.InFlight after Run last looked
	inflightB  int // Core.InFlightBytes after Run last looked
	stats      Stats
	done       bool
	doneErr    error
	sendErr    error // first error from client.Send
}

// New builds a Node for client. With Config.Incarnation 0 it takes the
// wall clock in ns, which grows across restarts.
func New(cfg Config, h Handler, client transport.Client) (*Node, error) {
	if cfg.Incarnation == 0 {
		cfg.Incarnation = uint64(time.Now().UnixNano())
	}
	n := &Node{cfg: cfg, client: client, user: h, start: time.Now()}
	n.space.L = &n.mu
	core, err := NewCore(cfg, shellHandler{n: n}, shellOutput{n: n})
	if err != nil {
		return nil, err
	}
	n.core = core
	n.onRecv = n.receive
	n.waker, _ = client.(transport.Waker)
	n.rewinding.Store(core.Rewinding())
	return n, nil
}

// SetIdleSpin makes Run poll without blocking for d after each frame
// (see transport.Idle): lower latency for a busy core. Call it before Run.
func (n *Node) SetIdleSpin(d time.Duration) { n.idle.Spin = d }

// Run drives the node until ctx is done or the core stops with a fatal
// error (ErrUnrecoverable, ErrDiverged), which it returns; a transport
// error is returned too. Handler callbacks run on this goroutine.
func (n *Node) Run(ctx context.Context) error {
	n.runID.Store(goroutineID())
	got := 0
	for {
		if err := ctx.Err(); err != nil {
			return n.finish(err)
		}
		wait := n.idle.Wait(got, maxPollWait)
		// polling is set before ops is checked, and Send appends to ops
		// before it reads polling: either Run sees the op, or Send sees
		// polling and wakes the Poll.
		n.polling.Store(true)
		n.mu.Lock()
		if len(n.ops) > 0 {
			wait = 0
		}
		n.mu.Unlock()
		var err error
		got, err = n.client.Poll(n.onRecv, wait)
		n.polling.Store(false)
		if err != nil {
			return n.finish(err)
		}
		now := n.clock()
		n.inCore.Store(true)
		n.applyOps(now)
		n.core.Tick(now)
		n.inCore.Store(false)
		n.publish()
		if err := n.core.Err(); err != nil {
			return n.finish(err)
		}
		// Only a closed transport is fatal: anything else a Flush reports
		// is loss, which the transport counts and the protocol repairs
		// (commands are resent until acked).
		if err := n.client.Flush(); errors.Is(err, transport.ErrClosed) {
			return n.finish(err)
		}
		n.mu.Lock()
		err = n.sendErr
		n.mu.Unlock()
		if err != nil {
			return n.finish(err)
		}
	}
}

func (n *Node) clock() int64 { return int64(time.Since(n.start)) }

// receive is the transport handler: one frame into the Core. Malformed
// frames are counted by the Core and otherwise ignored.
func (n *Node) receive(frame []byte, _ transport.Peer) {
	now := n.clock()
	n.inCore.Store(true)
	_ = n.core.Step(now, frame)
	n.applyOps(now) // commands sent by callbacks go out with this batch
	n.inCore.Store(false)
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
			// The shell admitted it against the same window the core
			// keeps, so the core accepts it.
			_, _ = n.core.Send(now, b[o.off:o.off+o.n])
			applied++
			appliedB += o.n
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
	n.now.Store(n.core.Now())
	n.rewinding.Store(n.core.Rewinding())
	n.mu.Lock()
	inflight, inflightB := n.core.InFlight(), n.core.InFlightBytes()
	if inflight < n.inflight || inflightB < n.inflightB {
		n.space.Broadcast()
	}
	n.inflight, n.inflightB = inflight, inflightB
	n.stats = n.core.Stats()
	n.mu.Unlock()
}

func (n *Node) finish(err error) error {
	n.mu.Lock()
	n.done = true
	n.doneErr = err
	n.space.Broadcast()
	n.mu.Unlock()
	return err
}

// Send queues payload (copied) as a command. Safe from any goroutine and
// from Handler callbacks. A full window returns ErrWindowFull, or with
// BlockWhenFull waits for space (until Run ends); inside a callback it
// never waits, since only the Run goroutine can free space, and returns
// ErrWindowFull.
func (n *Node) Send(p []byte) error {
	return n.enqueue(op{kind: opSend}, p, true)
}

// SendString is Send for a string, without converting it to a slice.
func (n *Node) SendString(s string) error {
	return n.Send(unsafe.Slice(unsafe.StringData(s), len(s))) // read only: copied by enqueue
}

// SetTimer schedules centralized timer id at sequencer time Now()+after;
// it fires through OnTimer at the same point of the stream everywhere.
func (n *Node) SetTimer(id uint64, after time.Duration) error {
	return n.enqueue(op{kind: opTimer, id: id, at: n.Now() + int64(after)}, nil, true)
}

// SetPeriodicTimer schedules centralized timer id at sequencer time at,
// then every period.
func (n *Node) SetPeriodicTimer(id uint64, at int64, period time.Duration) error {
	return n.enqueue(op{kind: opTimer, id: id, at: at, period: int64(period)}, nil, true)
}

// CancelTimer cancels centralized timer id.
func (n *Node) CancelTimer(id uint64) error {
	return n.enqueue(op{kind: opCancelTimer, id: id}, nil, true)
}

// SetLocalTimer calls OnLocalTimer(id) after the given local time.
func (n *Node) SetLocalTimer(id uint64, after time.Duration) {
	_ = n.enqueue(op{kind: opLocalTimer, id: id, after: after}, nil, false)
}

func (n *Node) enqueue(o op, p []byte, command bool) error {
	if command {
		if n.cfg.ReadOnly {
			return ErrReadOnly
		}
		if len(p) > n.cfg.MaxMessageBytes {
			return ErrTooLarge
		}
	}
	n.mu.Lock()
	for {
		if n.done {
			err := n.doneErr
			n.mu.Unlock()
			return err
		}
		if !command || n.inflight+n.queued < n.cfg.Window &&
			(n.inflight+n.queued == 0 || n.inflightB+n.queuedB+len(p) <= n.cfg.WindowBytes) {
			break
		}
		// Only a full window pays for goroutineID: a callback on the Run
		// goroutine must not wait for acks that only Run can process.
		if !n.cfg.BlockWhenFull || n.inCore.Load() && goroutineID() == n.runID.Load() {
			n.mu.Unlock()
			return ErrWindowFull
		}
		n.space.Wait()
	}
	o.off, o.n = len(n.opBytes), len(p)
	n.opBytes = append(n.opBytes, p...)
	n.ops = append(n.ops, o)
	if command {
		n.queued++
		n.queuedB += len(p)
	}
	n.mu.Unlock()
	if n.waker != nil && n.polling.Load() {
		n.waker.Wake()
	}
	return nil
}

// Now is sequencer time (see Core.Now); inside a callback, the time of the
// message being delivered.
func (n *Node) Now() int64 { return n.now.Load() }

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

// Incarnation is the incarnation in use (picked by New when 0).
func (n *Node) Incarnation() uint64 { return n.cfg.Incarnation }

// shellHandler forwards callbacks to the user's Handler, refreshing the
// mirrors first so that Node.Now and Node.Rewinding are current inside.
type shellHandler struct{ n *Node }

func (s shellHandler) OnMessage(m *Message) {
	s.n.now.Store(s.n.core.Now())
	s.n.rewinding.Store(s.n.core.Rewinding())
	s.n.user.OnMessage(m)
}

func (s shellHandler) OnActivated() {
	if a, ok := s.n.user.(ActivationHandler); ok {
		a.OnActivated()
	}
}

func (s shellHandler) OnDeactivated() {
	if a, ok := s.n.user.(ActivationHandler); ok {
		a.OnDeactivated()
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

// shellOutput hands the Core's frames to the client (Run goroutine only).
type shellOutput struct{ n *Node }

func (o shellOutput) Send(frame []byte) {
	if err := o.n.client.Send(frame); err != nil {
		o.n.mu.Lock()
		if o.n.sendErr == nil {
			o.n.sendErr = err
		}
		o.n.mu.Unlock()
	}
}

// goroutineID parses the current goroutine's id from its stack header
// ("goroutine 123 [running]:"). Go hides goroutine identity on purpose; we
// need it only to tell a callback's Send from another goroutine's when the
// window is full, off the hot path.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
