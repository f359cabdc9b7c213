package rewind

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/wire"
)

type watcher struct {
	counter
	at    int
	reach chan struct{}
}

func (w *watcher) OnMessage(m *node.Message) {
	w.counter.OnMessage(m)
	if w.n == w.at {
		close(w.reach)
	}
}

// TestRewind_ReplayerDiesMidRewind: the replayer serving a rewind dies
// midway (its server closes the connection); the node resumes the rewind
// at the next seq it needs from the next replayer and delivers every
// message once, in order. A first address where nothing listens is
// skipped the same way.
func TestRewind_ReplayerDiesMidRewind(t *testing.T) {
	n := 300_000
	if raceEnabled {
		n = 100_000
	}
	s := fillStore(t, t.TempDir(), n, 256)
	defer s.Close()
	serve := func() (*replayer.RewindServer, string) {
		cfg := replayer.DefaultRewindConfig()
		cfg.BufferBytes = 64 << 10 // small writes: the rewind is midway when it dies
		srv, err := replayer.NewRewindServer(s.Tip(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return srv, l.Addr().String()
	}
	first, a1 := serve()
	second, a2 := serve()
	dead := freeAddr(t)

	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, benchSession, uint64(n+1), uint64(n), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl := &idleClient{hb: hb, wake: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	cfg.Commit(0)
	h := &watcher{counter: counter{want: n, done: make(chan struct{})}, at: n / 3, reach: make(chan struct{})}
	nd, err := node.New(cfg, h, cl)
	if err != nil {
		t.Fatal(err)
	}
	nd.SetRewindAddr(dead, a1, a2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- nd.Run(ctx) }()
	select {
	case <-h.reach:
		first.Close() // the first live replayer dies mid-rewind
	case err := <-errc:
		t.Fatal(err)
	}
	select {
	case <-h.done:
	case err := <-errc:
		t.Fatalf("run: %v (delivered %d of %d)", err, h.n, n)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if h.err || h.last != uint64(n) {
		t.Fatalf("gap or repeat: last %d, want %d", h.last, n)
	}
	if first.Stats().Accepted != 1 || second.Stats().Accepted != 1 {
		t.Fatalf("rewinds accepted: first %d, second %d; want 1 and 1", first.Stats().Accepted, second.Stats().Accepted)
	}
}

// TestRewind_AllReplayersDeadFails: with no replayer reachable the node
// stops with ErrRewind naming the replayer, never goes on with a gap.
func TestRewind_AllReplayersDeadFails(t *testing.T) {
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, benchSession, 1001, 1000, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl := &idleClient{hb: hb, wake: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	cfg.Commit(0)
	nd, err := node.New(cfg, &counter{want: -1}, cl)
	if err != nil {
		t.Fatal(err)
	}
	dead := freeAddr(t)
	nd.SetRewindAddr(dead)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = nd.Run(ctx)
	if !errors.Is(err, node.ErrRewind) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Run: %v, want ErrRewind naming %s", err, dead)
	}
}

// TestRewind_OtherSessionRefused: a replayer holding another session than
// the live stream's refuses the rewind (the request names the live
// session), and the node stops with ErrRewind saying so, instead of
// taking packets it would fence and waiting forever.
func TestRewind_OtherSessionRefused(t *testing.T) {
	s := fillStore(t, t.TempDir(), 1000, 64)
	defer s.Close()
	srv, err := replayer.NewRewindServer(s.Tip(), replayer.DefaultRewindConfig())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, benchSession+1, 1001, 1000, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl := &idleClient{hb: hb, wake: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	cfg.Commit(0)
	nd, err := node.New(cfg, &counter{want: -1}, cl)
	if err != nil {
		t.Fatal(err)
	}
	nd.SetRewindAddr(l.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := nd.Run(ctx); !errors.Is(err, node.ErrRewind) || !strings.Contains(err.Error(), "session") {
		t.Fatalf("Run: %v, want ErrRewind naming the session", err)
	}
}

type firstLast struct {
	counter
	first   uint64
	n       *node.Node
	notRewd int // messages delivered with Rewinding() false
}

func (f *firstLast) OnMessage(m *node.Message) {
	if f.first == 0 {
		f.first = m.Seq
		f.last = m.Seq - 1
	}
	if !f.n.Rewinding() {
		f.notRewd++
	}
	f.counter.OnMessage(m)
}

// TestRewind_RestartFromSnapshot: a node restarting from its own snapshot
// of seq S (Config.Commit(S)) delivers S+1 onwards, each once and in order,
// each with Rewinding() true (they precede the first seq it saw live).
func TestRewind_RestartFromSnapshot(t *testing.T) {
	const n, committed = 20_000, 12_345
	s := fillStore(t, t.TempDir(), n, 100)
	defer s.Close()
	srv, err := replayer.NewRewindServer(s.Tip(), replayer.DefaultRewindConfig())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, benchSession, n+1, n, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl := &idleClient{hb: hb, wake: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	cfg.Commit(committed)
	h := &firstLast{counter: counter{want: n - committed, done: make(chan struct{})}}
	nd, err := node.New(cfg, h, cl)
	if err != nil {
		t.Fatal(err)
	}
	h.n = nd
	nd.SetRewindAddr(l.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- nd.Run(ctx) }()
	select {
	case <-h.done:
	case err := <-errc:
		t.Fatal(err)
	}
	cancel()
	<-errc
	// Every seq delivered lies below the first live one (n+1): each was
	// delivered with Rewinding() true; with all of them delivered, the
	// node is no longer rewinding.
	if h.notRewd != 0 || nd.Rewinding() {
		t.Fatalf("%d messages delivered with Rewinding() false; Rewinding() now %v", h.notRewd, nd.Rewinding())
	}
	if h.err || h.first != committed+1 || h.last != n {
		t.Fatalf("delivered %d..%d (gap or repeat: %v), want %d..%d", h.first, h.last, h.err, committed+1, n)
	}
}
