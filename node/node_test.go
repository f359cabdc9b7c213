package node

import (
	"context"
	"errors"
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
	t      testing.TB
	srv    transport.Server
	s      *stream
	next   uint64
	last   map[wire.Account]uint64
	inc    map[wire.Account]uint64
	recs   []rec
	gone   bool // answer every NAK with Gone
	onRecv transport.Handler
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
		// Re-entrant send from inside the callback.
		if err := h.n.SendString("pong" + p[4:]); err != nil {
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
		if err := n.SendString("ping" + string(rune('a'+i%26))); err != nil {
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
	if err := n.Send([]byte("x")); !errors.Is(err, context.Canceled) {
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
	want := "node: unrecoverable gap: seqs 1..49 no longer retained by sequencer (oldest 50)"
	if !errors.Is(err, ErrUnrecoverable) || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
}

func TestGoroutineIDTellsGoroutinesApart(t *testing.T) {
	here := goroutineID()
	other := make(chan uint64)
	go func() { other <- goroutineID() }()
	if o := <-other; here == 0 || o == 0 || o == here || goroutineID() != here {
		t.Fatalf("ids here=%d other=%d", here, o)
	}
}
