package hybrid

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/transport/transporttest"
)

const liveness = 10 * time.Second

func tcpConfig() tcp.Config {
	cfg := tcp.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// twoTCP returns a hybrid over two tcp servers with clients[i] connected to
// server i%2.
func twoTCP(tb testing.TB, clients int) (*Server, []*tcp.Server, []*tcp.Client) {
	tb.Helper()
	cfg := tcpConfig()
	inner := make([]*tcp.Server, 2)
	for i := range inner {
		s, err := tcp.NewServer(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		inner[i] = s
	}
	h, err := New(inner[0], inner[1])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	cls := make([]*tcp.Client, clients)
	for i := range cls {
		ccfg := cfg
		ccfg.Addr = inner[i%2].Addr().String()
		c, err := tcp.Dial(ccfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		cls[i] = c
	}
	deadline := time.Now().Add(liveness)
	for inner[0].Clients()+inner[1].Clients() < clients {
		if time.Now().After(deadline) {
			tb.Fatalf("clients did not connect")
		}
		h.Poll(func([]byte, transport.Peer) {}, time.Millisecond)
	}
	return h, inner, cls
}

func TestConformance_TwoTCPServers(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		h, _, cls := twoTCP(t, n)
		out := make([]transport.Client, n)
		for i, c := range cls {
			out[i] = c
		}
		return h, out, func() {
			h.Close()
			for _, c := range cls {
				c.Close()
			}
		}
	})
}

type recorder struct {
	frames []string
	from   []transport.Peer
}

func (r *recorder) handle(frame []byte, from transport.Peer) {
	r.frames = append(r.frames, string(frame))
	r.from = append(r.from, from)
}

func pollUntil(t *testing.T, who string, p interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, r *recorder, n int) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for len(r.frames) < n {
		if _, err := p.Poll(r.handle, 5*time.Millisecond); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d frames", who, len(r.frames), n)
		}
	}
}

func TestServer_PublishReachesClientsOfBothServers(t *testing.T) {
	h, _, cls := twoTCP(t, 4)
	for i := range 100 {
		if err := h.Publish(fmt.Appendf(nil, "event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	for k, c := range cls {
		var r recorder
		pollUntil(t, fmt.Sprintf("client %d", k), c, &r, 100)
		for i, f := range r.frames {
			if want := fmt.Sprintf("event %d", i); f != want {
				t.Fatalf("client %d frame %d = %q, want %q", k, i, f, want)
			}
		}
	}
}

func TestServer_SendToReachesTheRightServersClient(t *testing.T) {
	h, _, cls := twoTCP(t, 4)
	for k, c := range cls {
		c.Send(fmt.Appendf(nil, "from %d", k))
		c.Flush()
	}
	var r recorder
	pollUntil(t, "hybrid", h, &r, len(cls))
	peerOf := map[string]transport.Peer{}
	for i, f := range r.frames {
		peerOf[f] = r.from[i]
	}
	for k := range cls {
		p := peerOf[fmt.Sprintf("from %d", k)]
		if index, inner := h.Inner(p); index != k%2 || inner == transport.NoPeer {
			t.Fatalf("client %d (on server %d) has Peer %#x = server %d, inner %d", k, k%2, p, index, inner)
		}
	}
	// Reply to each client in turn; each must see its own reply first
	// (a misrouted reply would be queued ahead of it on the wrong client).
	for k := range cls {
		if err := h.SendTo(peerOf[fmt.Sprintf("from %d", k)], fmt.Appendf(nil, "to %d", k)); err != nil {
			t.Fatal(err)
		}
	}
	h.Flush()
	for k, c := range cls {
		var r recorder
		pollUntil(t, fmt.Sprintf("client %d", k), c, &r, 1)
		if want := fmt.Sprintf("to %d", k); r.frames[0] != want {
			t.Fatalf("client %d got %q, want %q", k, r.frames[0], want)
		}
	}
}

// fake is an inner server without Notifier that returns queued frames.
type fake struct {
	frames  [][]byte
	from    []transport.Peer
	polls   int
	readyAt int // frames are visible from this poll on
	sentTo  []transport.Peer
	closed  bool
}

func (f *fake) Publish([]byte) error { return nil }
func (f *fake) SendTo(to transport.Peer, _ []byte) error {
	f.sentTo = append(f.sentTo, to)
	return nil
}
func (f *fake) Flush() error { return nil }
func (f *fake) Poll(h transport.Handler, _ time.Duration) (int, error) {
	f.polls++
	if f.polls < f.readyAt {
		return 0, nil
	}
	for i, fr := range f.frames {
		h(fr, f.from[i])
	}
	n := len(f.frames)
	f.frames, f.from = nil, nil
	return n, nil
}
func (f *fake) Close() error { f.closed = true; return nil }

func TestServer_PeerNamespacing(t *testing.T) {
	a := &fake{frames: [][]byte{[]byte("a1"), []byte("a2")}, from: []transport.Peer{5, transport.NoPeer}}
	b := &fake{frames: [][]byte{[]byte("b1"), []byte("b2")}, from: []transport.Peer{5, 1 << 31}}
	h, err := New(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	if n, err := h.Poll(r.handle, 0); n != 4 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	got := map[string]transport.Peer{}
	for i, f := range r.frames {
		got[f] = r.from[i]
	}
	want := map[string]transport.Peer{"a1": 5, "a2": transport.NoPeer, "b1": 1<<31 | 5, "b2": transport.NoPeer}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("peers %v, want %v", got, want)
	}
	if h.Unroutable() != 1 {
		t.Fatalf("Unroutable = %d, want 1 (b2's inner peer uses the index bit)", h.Unroutable())
	}
	h.SendTo(got["b1"], []byte("x"))
	h.SendTo(got["a1"], []byte("y"))
	h.SendTo(1<<31, []byte("z")) // server 1, inner NoPeer: nobody
	if fmt.Sprint(a.sentTo, b.sentTo) != "[5] [5]" {
		t.Fatalf("SendTo reached a %v, b %v", a.sentTo, b.sentTo)
	}
	if h.Counters().Dropped != 1 {
		t.Fatalf("Dropped = %d, want 1", h.Counters().Dropped)
	}
	if err := h.Close(); err != nil || !a.closed || !b.closed {
		t.Fatalf("Close = %v, inner closed %v %v", err, a.closed, b.closed)
	}
	if _, err := h.Poll(r.handle, 0); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Poll after Close = %v", err)
	}
}

func TestServer_OneServerIsTransparent(t *testing.T) {
	a := &fake{frames: [][]byte{[]byte("a")}, from: []transport.Peer{0xFFFFFFFF}}
	h := NewServer(a)
	var r recorder
	h.Poll(r.handle, 0)
	if len(r.from) != 1 || r.from[0] != 0xFFFFFFFF {
		t.Fatalf("peer %v, want the inner peer unchanged", r.from)
	}
	if _, err := New(); !errors.Is(err, ErrNoServers) {
		t.Fatalf("New() = %v", err)
	}
}

// An inner server that cannot notify is polled again after each slice, so
// a waiting Poll still finds its frames.
func TestServer_WaitFindsFramesOfServerWithoutNotifier(t *testing.T) {
	a := &fake{frames: [][]byte{[]byte("late")}, from: []transport.Peer{1}, readyAt: 4}
	h, _ := New(a, &fake{})
	var r recorder
	n, err := h.Poll(r.handle, liveness)
	if n != 1 || err != nil || r.frames[0] != "late" {
		t.Fatalf("Poll = %d, %v, frames %q", n, err, r.frames)
	}
}

func TestServer_PublishFlushPollAllocatesNothing(t *testing.T) {
	h, _, cls := twoTCP(t, 2)
	frame := bytes.Repeat([]byte{1}, 256)
	counts := make([]int, len(cls))
	handlers := make([]transport.Handler, len(cls))
	for i := range cls {
		c := &counts[i]
		handlers[i] = func([]byte, transport.Peer) { *c++ }
	}
	cmd := []byte("cmd")
	replies := 0
	onCmd := func([]byte, transport.Peer) { replies++ }
	want := 0
	cycle := func() {
		for range 16 {
			h.Publish(frame)
		}
		h.Flush()
		want += 16
		for i, c := range cls {
			for counts[i] < want {
				c.Poll(handlers[i], liveness)
			}
			c.Send(cmd)
			c.Flush()
		}
		for replies < want/16*len(cls) {
			h.Poll(onCmd, liveness)
		}
	}
	for range 10 {
		cycle()
	}
	if a := testing.AllocsPerRun(200, cycle); a != 0 {
		t.Fatalf("hybrid Publish+Flush+Poll allocates %v per cycle", a)
	}
}

// BenchmarkPublishPoll measures one frame from hybrid Publish to the
// handler of one client on each of two tcp servers.
func BenchmarkPublishPoll(b *testing.B) {
	h, _, cls := twoTCP(b, 2)
	frame := make([]byte, 256)
	counts := make([]int, len(cls))
	handlers := make([]transport.Handler, len(cls))
	for i := range cls {
		c := &counts[i]
		handlers[i] = func([]byte, transport.Peer) { *c++ }
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		for end := min(sent+64, b.N); sent < end; sent++ {
			h.Publish(frame)
		}
		h.Flush()
		for i, c := range cls {
			for counts[i] < sent {
				c.Poll(handlers[i], liveness)
			}
		}
	}
}
