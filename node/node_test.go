package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// echoSequencer is a minimal test sequencer over a transport.Server: it
// accepts each sender's commands in cmdSeq order (whole commands only)
// and publishes them, stable at once.
type echoSequencer struct {
	t    testing.TB
	srv  transport.Server
	s    *stream
	next uint64
	last map[wire.Account]uint64
	inc  map[wire.Account]uint64
	recs []rec
	gone bool // answer every NAK with Gone
	// rejectOver: commands larger than this are refused with an
	// InternalRejected record (0: none).
	rejectOver int
	onRecv     transport.Handler
}

func newEchoSequencer(t testing.TB, srv transport.Server) *echoSequencer {
	e := &echoSequencer{t: t, srv: srv, s: newStream(t), next: 1, last: map[wire.Account]uint64{}, inc: map[wire.Account]uint64{}}
	e.onRecv = e.receive
	return e
}

func (e *echoSequencer) receive(frame []byte, from transport.Peer) {
	if k, _ := wire.PeekKind(frame); k == wire.KindNak && e.gone {
		var nk wire.Nak
		if wire.DecodeNak(frame, &nk) == nil {
			e.srv.SendTo(from, e.s.gone(nk.FromSeq, e.next))
		}
		return
	}
	var p wire.CommandPacket
	if wire.DecodeCommand(frame, &p) != nil {
		return
	}
	if p.Incarnation > e.inc[p.Account] {
		e.inc[p.Account] = p.Incarnation
		e.last[p.Account] = 0
		e.recs = append(e.recs, e.s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: p.Account, Instance: p.Instance, Value: p.Incarnation}))
	}
	var c wire.Command
	for p.Next(&c) {
		if c.CmdSeq != e.last[p.Account]+1 || c.Fragment() {
			continue
		}
		e.last[p.Account] = c.CmdSeq
		if e.rejectOver > 0 && len(c.Payload) > e.rejectOver {
			e.recs = append(e.recs, e.s.internal(wire.Internal{Type: wire.InternalRejected, Account: p.Account, Instance: p.Instance,
				ID: c.CmdSeq, Value: uint64(wire.RejectTooLarge), Extra: int64(p.Incarnation)}))
			continue
		}
		e.recs = append(e.recs, rec{payload: append([]byte(nil), c.Payload...), account: p.Account, inst: p.Instance, cmdSeq: c.CmdSeq})
	}
}

func (e *echoSequencer) run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := e.srv.Poll(e.onRecv, time.Millisecond); err != nil {
			return
		}
		for len(e.recs) > 0 {
			n := min(len(e.recs), 20)
			last := e.next + uint64(n) - 1
			e.srv.Publish(e.s.packet(e.next, last, int64(e.next), e.recs[:n]...))
			e.next = last + 1
			e.recs = e.recs[n:]
		}
		e.srv.Flush()
	}
}

type pingPong struct {
	n     *Node
	mu    sync.Mutex
	pings int
	pongs int
	order []string
	done  chan struct{}
	want  int
	errs  []error
}

func (h *pingPong) OnMessage(m *Message) {
	if !m.Mine() || m.Internal() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p := string(m.Payload)
	h.order = append(h.order, p)
	if strings.HasPrefix(p, "ping") {
		h.pings++
		// Re-entrant send from inside the callback: TrySend never waits.
		if _, err := h.n.TrySendString("pong" + p[4:]); err != nil {
			h.errs = append(h.errs, err)
		}
	} else {
		h.pongs++
	}
	if h.pongs+len(h.errs) == h.want {
		close(h.done)
	}
}

func TestNode_SendFromCallbackAndOtherGoroutine(t *testing.T) {
	network, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seqr := newEchoSequencer(t, network.Server())
	go seqr.run(ctx)

	cfg := testConfig()
	cfg.Incarnation = 0
	cfg.Window = 64
	cfg.BlockWhenFull = true
	const total = 300
	h := &pingPong{done: make(chan struct{}), want: total}
	n, err := New(cfg, h, network.Client())
	if err != nil {
		t.Fatal(err)
	}
	h.n = n
	if n.Incarnation() == 0 {
		t.Fatal("New did not pick an incarnation")
	}
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	for i := 0; i < total; i++ {
		if _, err := n.SendString("ping" + string(rune('a'+i%26))); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	select {
	case <-h.done:
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatalf("stuck: %+v", n.Stats())
	}
	cancel()
	if err := <-runErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Callback sends can only meet a full window when 64 are in flight;
	// each such error is reported, never a deadlock or a silent loss.
	for _, e := range h.errs {
		if !errors.Is(e, ErrWindowFull) {
			t.Fatalf("callback Send: %v", e)
		}
	}
	if h.pings != total || h.pongs+len(h.errs) != total {
		t.Fatalf("pings %d pongs %d errs %d", h.pings, h.pongs, len(h.errs))
	}
	if _, err := n.Send([]byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send after Run ended: %v", err)
	}
}

func TestNode_RunStopsOnUnrecoverableGap(t *testing.T) {
	network, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := network.Server()
	cfg := testConfig()
	cfg.ReadOnly = true
	n, err := New(cfg, &recorder{}, network.Client())
	if err != nil {
		t.Fatal(err)
	}
	seqr := newEchoSequencer(t, srv)
	seqr.gone = true
	seqr.next = 50
	srv.Publish(seqr.s.msgs(50, 1)) // a late joiner: 1..49 are gone
	srv.Flush()
	go seqr.run(ctx)
	err = n.Run(ctx)
	want := "receiver: unrecoverable gap: seqs 1..49 no longer retained by sequencer (oldest 50)"
	if !errors.Is(err, ErrUnrecoverable) || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
}

// TestNode_BlockedSendEnds: a Send waiting for window space ends at its
// deadline (SendTimeout) or its context, never waits forever (it used to,
// with no sequencer acking), and TrySend never waits.
func TestNode_BlockedSendEnds(t *testing.T) {
	network, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testConfig()
	cfg.Window = 1
	cfg.BlockWhenFull = true
	cfg.SendTimeout = 20 * time.Millisecond
	n, err := New(cfg, &recorder{}, network.Client()) // no sequencer: nothing is acked
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	if q, err := n.Send([]byte("a")); err != nil || q != 1 {
		t.Fatalf("first Send: %d %v", q, err)
	}
	if _, err := n.TrySend([]byte("b")); !errors.Is(err, ErrWindowFull) {
		t.Fatalf("TrySend with a full window: %v", err)
	}
	ended := make(chan error, 1)
	go func() { _, err := n.Send([]byte("b")); ended <- err }()
	select {
	case err := <-ended:
		if !errors.Is(err, ErrWindowFull) {
			t.Fatalf("Send past its deadline: %v, want ErrWindowFull", err)
		}
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("a blocked Send did not end at its deadline")
	}
	sctx, scancel := context.WithCancel(context.Background())
	go func() { _, err := n.SendContext(sctx, []byte("c")); ended <- err }()
	scancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("SendContext after cancel: %v", err)
	}
	cancel()
	<-runErr
	if _, err := n.SendContext(context.Background(), []byte("d")); !errors.Is(err, context.Canceled) {
		t.Fatalf("SendContext after Run ended: %v, want Run's error", err)
	}
	if n.InFlight() != 1 {
		t.Fatalf("InFlight %d: a refused Send was queued", n.InFlight())
	}
}

// pollClient is a transport.Client whose Poll blocks until the test
// releases it, counting Wakes and clock reads.
type pollClient struct {
	mu      sync.Mutex
	wakes   int
	polls   int
	entered chan struct{}
	release chan struct{}
	frames  [][]byte // handed to the handler by the next Poll
}

func (p *pollClient) Send([]byte) error { return nil }
func (p *pollClient) Flush() error      { return nil }
func (p *pollClient) Close() error      { return nil }
func (p *pollClient) Wake() {
	p.mu.Lock()
	p.wakes++
	p.mu.Unlock()
}

func (p *pollClient) Poll(h transport.Handler, wait time.Duration) (int, error) {
	p.mu.Lock()
	p.polls++
	frames := p.frames
	p.frames = nil
	p.mu.Unlock()
	for _, f := range frames {
		h(f, transport.NoPeer)
	}
	if wait > 0 && len(frames) == 0 {
		p.entered <- struct{}{}
		<-p.release
	}
	return len(frames), nil
}

// TestNode_SendsWakeABlockedPollOnce: while Run blocks in Poll, the first
// Send from another goroutine wakes it and the next ones do not (each
// Send woke it: a write to the eventfd per command).
func TestNode_SendsWakeABlockedPollOnce(t *testing.T) {
	cl := &pollClient{entered: make(chan struct{}), release: make(chan struct{})}
	cfg := testConfig()
	n, err := New(cfg, &recorder{}, cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	<-cl.entered // Run blocks in Poll
	for i := 0; i < 10; i++ {
		if _, err := n.Send([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	cl.mu.Lock()
	wakes := cl.wakes
	cl.mu.Unlock()
	if wakes != 1 {
		t.Fatalf("%d Wakes for 10 Sends during one blocked Poll, want 1", wakes)
	}
	cancel()
	cl.release <- struct{}{}
	go func() {
		for range cl.entered {
			cl.release <- struct{}{}
		}
	}()
	<-runErr
}

// TestNode_ReadsTheClockOncePerPoll: Run reads the local clock once per
// loop iteration, not once per frame (7% of a sending node's profile was
// time.Now).
func TestNode_ReadsTheClockOncePerPoll(t *testing.T) {
	s := newStream(t)
	cl := &pollClient{entered: make(chan struct{}), release: make(chan struct{})}
	for q := uint64(1); q <= 10; q++ {
		cl.frames = append(cl.frames, s.msgs(q, 1))
	}
	n, err := New(testConfig(), &recorder{}, cl)
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	n.clock = func() int64 { reads++; return int64(reads) }
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	<-cl.entered // the first Poll delivered 10 frames, the second blocks
	got, delivered := reads, n.Stats().Delivered
	cancel()
	cl.release <- struct{}{}
	<-runErr
	if delivered != 10 || got != 1 {
		t.Fatalf("%d clock reads for one Poll of %d frames, want 1", got, delivered)
	}
}

// rejectRecorder records rejections and the node's own messages.
type rejectRecorder struct {
	mu       sync.Mutex
	mine     []string
	rejected []uint64
	errs     []error
	done     chan struct{}
}

func (r *rejectRecorder) OnMessage(m *Message) {
	if !m.Mine() || m.Internal() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mine = append(r.mine, string(m.Payload))
	if string(m.Payload) == "last" {
		close(r.done)
	}
}

func (r *rejectRecorder) OnRejected(cmdSeq uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, cmdSeq)
	r.errs = append(r.errs, err)
}

// TestNode_RejectedCommandReachesTheHandler: a command the sequencer
// refuses comes back through OnRejected with its cmdSeq (the one Send
// returned) and ErrRejected; the commands after it are delivered.
func TestNode_RejectedCommandReachesTheHandler(t *testing.T) {
	network, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seqr := newEchoSequencer(t, network.Server())
	seqr.rejectOver = 10
	go seqr.run(ctx)
	h := &rejectRecorder{done: make(chan struct{})}
	cfg := testConfig()
	cfg.Incarnation = 0
	n, err := New(cfg, h, network.Client())
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	var seqs []uint64
	for _, p := range []string{"first", "far too large", "last"} {
		q, err := n.SendString(p)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, q)
	}
	select {
	case <-h.done:
	case err := <-runErr:
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatalf("stuck: %+v", n.Stats())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Equal(seqs, []uint64{1, 2, 3}) || !slices.Equal(h.rejected, []uint64{2}) ||
		!errors.Is(h.errs[0], ErrRejected) || !slices.Equal(h.mine, []string{"first", "last"}) {
		t.Fatalf("sent as %v; rejected %v (%v); delivered %q", seqs, h.rejected, h.errs, h.mine)
	}
	// Stats are published after the step that delivered "last".
	for st := n.Stats(); st.Rejected != 1; st = n.Stats() {
		if st.Rejected > 1 {
			t.Fatalf("Stats().Rejected = %d", st.Rejected)
		}
		time.Sleep(time.Millisecond)
	}
}
