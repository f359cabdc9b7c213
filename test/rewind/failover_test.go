package rewind

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
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
	cfg := replayer.DefaultRewindConfig()
	cfg.BufferBytes = 64 << 10 // small writes: the rewind is midway when it dies
	first, a1 := serveRewind(t, s, cfg, nil)
	second, a2 := serveRewind(t, s, cfg, nil)
	dead := freeAddr(t)

	h := &watcher{counter: counter{want: n, done: make(chan struct{})}, at: n / 3, reach: make(chan struct{})}
	nd := rewindingNode(t, benchSession, uint64(n), 0, h)
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
	nd := rewindingNode(t, benchSession, 1000, 0, &counter{want: -1})
	dead := freeAddr(t)
	nd.SetRewindAddr(dead)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := nd.Run(ctx)
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
	_, addr := serveRewind(t, s, replayer.DefaultRewindConfig(), nil)
	nd := rewindingNode(t, benchSession+1, 1000, 0, &counter{want: -1})
	nd.SetRewindAddr(addr)
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
	_, addr := serveRewind(t, s, replayer.DefaultRewindConfig(), nil)
	h := &firstLast{counter: counter{want: n - committed, done: make(chan struct{})}}
	nd := rewindingNode(t, benchSession, n, committed, h)
	h.n = nd
	nd.SetRewindAddr(addr)
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
