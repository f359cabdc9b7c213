package sequencer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/agent"
	"github.com/seqd/seqd/transport"
)

// Agent is the thin shell that runs a Core over a transport.Server, an
// agent.Agent run by an agent.Runner: each iteration polls frames and
// steps them into the core (Poll), then flushes when the input is drained
// (the idle flush), ticks, and flushes the transport (DoWork). The core
// never sees a socket, a goroutine or a clock: the agent reads its clock
// once per poll batch (at the batch's first frame, or after the poll when
// none came; the runner's reading is that one) and hands that reading to
// every call of the iteration.
type Agent struct {
	core     *Core
	srv      transport.Server
	ret      transport.Retainer // srv's when the core retains (SetRetained)
	clock    func() Time
	now      Time // this iteration's reading
	fresh    bool // now was read in this iteration
	run      *agent.Runner
	spin     time.Duration // SetIdleSpin
	lastSnap int64         // mono of the last snapshot

	onFrame transport.Handler
	// stableFn turns standby acks into stable (SetStableFunc); acks is
	// its reused buffer.
	stableFn StableFunc
	acks     []StandbyAck

	mu    sync.Mutex // guards stats and published, copied from the core on the Run goroutine
	stats Stats
	seq   uint64
}

// ServerSink is the Sink that hands a Repairer's (or a SinkShell's)
// output to a transport.Server. Send errors are the transport's to count
// (a closed server ends the shell's Poll loop anyway).
type ServerSink struct{ Server transport.Server }

// Publish sends pkt to every client.
func (s ServerSink) Publish(pkt []byte) { _ = s.Server.Publish(pkt) }

// PublishRetained sends pkt to every client without a copy when the
// server can (transport.Retainer), else as Publish.
func (s ServerSink) PublishRetained(pkt []byte) {
	if r, ok := s.Server.(transport.Retainer); ok {
		_ = r.PublishRetained(pkt)
		return
	}
	_ = s.Server.Publish(pkt)
}

// MaxRetainedBytes is what the server holds by reference at most (0: it
// copies every frame).
func (s ServerSink) MaxRetainedBytes() int {
	if r, ok := s.Server.(transport.Retainer); ok {
		return r.MaxRetainedBytes()
	}
	return 0
}

// SendTo sends pkt to one client.
func (s ServerSink) SendTo(to transport.Peer, pkt []byte) { _ = s.Server.SendTo(to, pkt) }

// SendReady hands c's Ready to srv in Ready's order, a Retained packet
// by reference (srv is then a transport.Retainer: SetRetained), and
// advances c. Send errors are the transport's to count.
func SendReady(c *Core, srv transport.Server) {
	if c.HasReady() {
		ret, _ := srv.(transport.Retainer)
		sendReady(c, srv, ret)
	}
}

// sendReady is SendReady with srv's Retainer (nil: none) known.
func sendReady(c *Core, srv transport.Server, ret transport.Retainer) {
	if !c.HasReady() {
		return
	}
	rd := c.Ready()
	for i := range rd.Packets {
		if p := &rd.Packets[i]; p.Retained && ret != nil {
			_ = ret.PublishRetained(p.Bytes)
		} else {
			_ = srv.Publish(p.Bytes)
		}
	}
	for i := range rd.Replies {
		_ = srv.SendTo(rd.Replies[i].To, rd.Replies[i].Bytes)
	}
	c.Advance()
}

// NewAgent builds a Core for cfg publishing on srv, reading time from
// clock (SystemClock outside tests).
func NewAgent(cfg Config, srv transport.Server, clock func() Time) (*Agent, error) {
	return newAgent(cfg, srv, clock, nil)
}

// NewPrimaryAgent is NewAgent for a new primary after a failover: its
// Core is NewPrimary(cfg, ..., t).
func NewPrimaryAgent(cfg Config, srv transport.Server, clock func() Time, t Takeover) (*Agent, error) {
	return newAgent(cfg, srv, clock, &t)
}

func newAgent(cfg Config, srv transport.Server, clock func() Time, t *Takeover) (*Agent, error) {
	if cfg.StartTime == 0 {
		// The session's first records (session start, epoch start) are
		// stamped now, not at the epoch of the clock.
		cfg.StartTime = clock().Wall
	}
	var core *Core
	var err error
	if t != nil {
		core, err = NewPrimary(cfg, *t)
	} else {
		core, err = New(cfg)
	}
	if err != nil {
		return nil, err
	}
	a := &Agent{core: core, srv: srv, clock: clock}
	if r, ok := srv.(transport.Retainer); ok && core.SetRetained(r.MaxRetainedBytes()) {
		a.ret = r
	}
	a.onFrame = a.frame
	return a, nil
}

// maxIdleWait bounds a Poll of Run when the core has no timed work due
// sooner, so that a change Run cannot see (a bug, a new kind of timed work
// not listed in IdleWait) costs at most this much delay.
const maxIdleWait = agent.DefaultMaxWait

// IdleWait is how long a shell running c may block waiting for input:
// until the core's next timed work, as of the last clock reading (the
// next heartbeat, the earliest centralized timer, the flow-limit refresh,
// the hot-hot activity check, the expiry of abandoned reassemblies),
// never longer than maxIdleWait (100 ms); 0 when work is due now. An idle
// sequencer then wakes once per heartbeat instead of every millisecond.
// The Agent and a cluster primary's shell (cluster.Member) use it. It reads
// the Core's fields directly (same package) and allocates nothing; the
// Core itself stays free of any notion of waiting.
func IdleWait(c *Core) time.Duration {
	if !c.clockSet || c.open || c.stable != c.stableSent {
		return 0
	}
	due := c.lastSend + c.hbEvery - c.mono
	if t := &c.state.timers; len(t.heap) > 0 {
		due = min(due, t.list[t.heap[0]].at-c.now) // sequencer time runs at the monotonic rate or faster
	}
	if len(c.asm.index) > 0 {
		due = min(due, c.asmExpireAt-c.mono)
	}
	if c.flow.limitPos != 0 {
		due = min(due, c.flow.updated+int64(c.cfg.FlowReceiverTimeout)/8-c.mono)
	}
	if c.cfg.ActiveTimeout > 0 {
		due = min(due, int64(c.cfg.ActiveTimeout)/8)
	}
	return time.Duration(max(0, min(due, int64(maxIdleWait))))
}

// StableFunc computes the stable seq from the standby acks taken in one
// loop iteration and the last seq published (the primary's own position):
// the cluster's quorum. The Agent hands its result to Core.SetStable. It
// runs on Run's goroutine; acks is valid only during the call.
type StableFunc func(acks []StandbyAck, published uint64) uint64

// SetStableFunc makes Run feed the standby acks each iteration brought to
// f, before it flushes, so that the packets of that iteration (or a
// heartbeat) carry the new stable at once. Call it before Run; with
// Config.Standalone false and no StableFunc, stable never moves.
func (a *Agent) SetStableFunc(f StableFunc) {
	a.stableFn = f
	a.acks = make([]StandbyAck, 0, maxPendingAcks)
}

// SetIdleSpin makes Run poll without blocking for d after each frame
// (see transport.Idle): lower latency for a busy core. Call it before Run.
func (a *Agent) SetIdleSpin(d time.Duration) { a.spin = d }

// Core returns the state machine. Use it only before Run starts or after it
// returns; while it runs, read Stats and Published instead.
func (a *Agent) Core() *Core { return a.core }

func (a *Agent) frame(frame []byte, from transport.Peer) {
	// A malformed frame is counted by the core and dropped; there is no
	// one to return the error to.
	_ = a.core.Step(a.read(), frame, from)
	sendReady(a.core, a.srv, a.ret) // before the next Step: Ready's contract
}

// read returns this iteration's clock reading, taking it on first use.
func (a *Agent) read() Time {
	if !a.fresh {
		a.now = a.clock()
		a.fresh = true
	}
	return a.now
}

// Run serves until ctx ends or the transport fails (Poll fails, or the
// transport is closed). It returns ctx.Err() on cancellation. A Flush
// error other than transport.ErrClosed does not stop it: output the
// network refused is loss, counted by the transport.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.start(); err != nil {
		return err
	}
	err := a.run.Run(ctx, a)
	a.snapshot()
	return err
}

// start builds the runner and publishes the core's first records.
func (a *Agent) start() error {
	cfg := agent.DefaultConfig()
	cfg.Spin, cfg.Clock = a.spin, a.mono
	r, err := agent.NewRunner(cfg)
	if err != nil {
		return err
	}
	a.run = r
	a.core.Flush(a.read())
	sendReady(a.core, a.srv, a.ret)
	a.lastSnap = a.now.Mono
	return nil
}

// mono is the runner's clock: this iteration's reading.
func (a *Agent) mono() int64 { return a.read().Mono }

// Poll steps the frames that come within wait into the core
// (agent.Agent).
func (a *Agent) Poll(wait time.Duration) (int, error) {
	a.fresh = false
	return a.srv.Poll(a.onFrame, wait)
}

// DoWork hands the standby acks to the StableFunc, flushes, ticks and
// flushes the transport (agent.Agent); only a closed transport is an
// error.
func (a *Agent) DoWork(int64) (int, error) {
	now := a.read()
	if a.stableFn != nil && a.core.PendingStandbyAcks() {
		a.takeAcks()
	}
	a.core.Flush(now)
	sendReady(a.core, a.srv, a.ret)
	a.core.Tick(now)
	sendReady(a.core, a.srv, a.ret)
	// Only a closed transport is fatal: anything else a Flush reports
	// is loss, which the transport counts and the protocol repairs.
	if err := a.srv.Flush(); errors.Is(err, transport.ErrClosed) {
		return 0, err
	}
	if now.Mono-a.lastSnap > int64(50*time.Millisecond) {
		a.lastSnap = now.Mono
		a.snapshot()
	}
	return 0, nil
}

// NextDue is the core's next timed work (IdleWait) as of this
// iteration's reading (agent.Agent).
func (a *Agent) NextDue() (int64, bool) { return a.now.Mono + int64(IdleWait(a.core)), true }

// takeAcks hands the pending standby acks to the StableFunc and its
// answer to the core.
func (a *Agent) takeAcks() {
	a.acks = a.core.TakeStandbyAcks(a.acks[:0])
	a.core.SetStable(a.stableFn(a.acks, a.core.Published()))
}

func (a *Agent) snapshot() {
	a.mu.Lock()
	a.stats = a.core.Stats()
	a.seq = a.core.NextSeq() - 1
	a.mu.Unlock()
}

// Stats returns the core's counters as of a recent loop iteration; safe
// from any goroutine.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// LastSeq returns the last sequence number assigned, as of a recent loop
// iteration; safe from any goroutine.
func (a *Agent) LastSeq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}
