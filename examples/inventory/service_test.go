package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/examples/inventory/internal/loopback"
	"github.com/seqd/seqd/examples/inventory/internal/pgtest"
	"github.com/seqd/seqd/node"
)

type running struct {
	in     *inventory.Instance
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, ctx context.Context, stack *loopback.Stack, inst uint8, db string) *running {
	t.Helper()
	cl, err := stack.Client()
	if err != nil {
		t.Fatal(err)
	}
	cfg := inventory.InstanceConfig{Account: "INV", Instance: inst, DB: db, Service: inventory.DefaultConfig(),
		RewindAddrs: []string{stack.RewindAddr()}}
	cfg.Service.BatchTxns = 256 // many flushes in a short test
	in, err := inventory.StartInstance(ctx, cfg, cl)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &running{in: in, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- in.Node.Run(rctx) }()
	return r
}

// load sends n transactions over keys keys: a restock of each, then
// reservations of 1..3 with a restock now and then, from one node.
func load(t *testing.T, ctx context.Context, stack *loopback.Stack, n, keys int, progress func(int)) {
	t.Helper()
	cl, err := stack.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cfg := node.DefaultConfig()
	cfg.Account = "LOAD"
	cfg.BlockWhenFull = true
	nd, err := node.New(cfg, nopHandler{}, cl)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- nd.Run(rctx) }()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		var u inventory.Update
		k := fmt.Sprintf("sku-%03d", rng.IntN(keys))
		switch {
		case i < keys:
			u = inventory.Update{Key: fmt.Sprintf("sku-%03d", i), Delta: 20}
		case i%50 == 0:
			u = inventory.Update{Key: k, Delta: 10}
		default:
			u = inventory.Update{Key: k, Delta: -int64(1 + rng.IntN(3))}
		}
		p, err := inventory.AppendTxn(nil, inventory.FlagRecord, uint64(i+1), u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nd.SendContext(ctx, p); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if progress != nil {
			progress(i)
		}
	}
	for nd.InFlight() > 0 {
		select {
		case err := <-errc:
			t.Fatalf("loader stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("timeout: the loader's commands not all in the stream")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type nopHandler struct{}

func (nopHandler) OnMessage(*node.Message) {}

// TestService_RestartRewindsFromFlushedSeq: two instances of the service
// apply a stream of reservations; one is killed midway (no last flush),
// restarts from its database and rewinds from the flushed seq + 1. At the
// end both hold the same digest, the same checkpoints, the same stock in
// memory and in their databases, the same orders, and no stock is below
// zero.
func TestService_RestartRewindsFromFlushedSeq(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { restartScenario(t, "sqlite:"+filepath.Join(t.TempDir(), "b.db")) })
	// The restarted instance on PostgreSQL, its partner on SQLite: the
	// same digests from two databases.
	t.Run("postgres", func(t *testing.T) { restartScenario(t, pgtest.Start(t)) })
}

func restartScenario(t *testing.T, dbB string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	stack, err := loopback.Start(ctx, filepath.Join(dir, "stream"), 0x1417)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	dbA := "sqlite:" + filepath.Join(dir, "a.db")
	a := start(t, ctx, stack, 1, dbA)
	b := start(t, ctx, stack, 2, dbB)

	const n, keys = 3000, 40
	var once sync.Once
	var flushedAtKill uint64
	load(t, ctx, stack, n, keys, func(i int) {
		if i < n/2 {
			return
		}
		once.Do(func() {
			// Kill it once it flushed part of the first half.
			for b.in.Service.Status().Flushed < 1500 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			b.cancel() // a crash: no last flush
			<-b.done
			flushedAtKill = b.in.Service.Status().Flushed
			b.in.Abandon()
			b = start(t, ctx, stack, 2, dbB)
			if got := b.in.Service.Resume(); got != flushedAtKill && got < flushedAtKill {
				t.Errorf("restart resumes after %d, want the flushed %d", got, flushedAtKill)
			}
		})
	})
	if flushedAtKill < 1500 {
		t.Fatal("nothing was flushed before the kill: the restart proves nothing")
	}
	// Wait until both applied the whole stream (replies still come).
	var last uint64
	for stable := 0; stable < 20; {
		select {
		case err := <-a.done:
			t.Fatalf("instance 1 stopped: %v", err)
		case err := <-b.done:
			t.Fatalf("instance 2 stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("timeout: applied %d and %d of %d", a.in.Service.Status().Applied, b.in.Service.Status().Applied, stack.LastSeq())
		case <-time.After(20 * time.Millisecond):
		}
		l := stack.LastSeq()
		sa, sb := a.in.Service.Status(), b.in.Service.Status()
		if l == last && sa.Applied == l && sb.Applied == l {
			stable++
		} else {
			stable = 0
		}
		last = l
	}
	a.cancel()
	b.cancel()
	for _, r := range []*running{a, b} {
		if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v", err)
		}
		if err := r.in.Service.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := a.in.Service.Status(), b.in.Service.Status()
	t.Logf("seq %d: %d transactions, %d refused; killed with %d flushed; digests %x %x; replies refused %d %d",
		sa.Applied, sa.Txns, sa.Refused, flushedAtKill, sa.Digest, sb.Digest, a.in.Service.ReplyErrors(), b.in.Service.ReplyErrors())
	if sa.Txns != n || sa.Refused == 0 {
		t.Fatalf("instance 1 applied %d transactions (%d refused), want %d with some refused", sa.Txns, sa.Refused, n)
	}
	if sa.Applied != sb.Applied || sa.Digest != sb.Digest || sa.Txns != sb.Txns || sa.Refused != sb.Refused || sb.Flushed != sb.Applied {
		t.Fatalf("status %+v and %+v: want the same seq and digest, flushed", sa, sb)
	}
	common, err := inventory.CompareCheckpoints(a.in.Service.Checkpoints(), b.in.Service.Checkpoints())
	if err != nil || common == 0 {
		t.Fatalf("checkpoints: %d in common, %v", common, err)
	}
	for k := range keys {
		key := fmt.Sprintf("sku-%03d", k)
		if x, y := a.in.Service.State().Stock(key), b.in.Service.State().Stock(key); x != y || x < 0 {
			t.Fatalf("%s: stock %d and %d", key, x, y)
		}
	}
	for _, r := range []*running{a, b} {
		snap, err := r.in.Store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Seq != sa.Applied || snap.Digest != sa.Digest {
			t.Fatalf("database at seq %d digest %x, want %d %x", snap.Seq, snap.Digest, sa.Applied, sa.Digest)
		}
		for i, k := range snap.Keys {
			if snap.Stock[i] != a.in.Service.State().Stock(k) {
				t.Fatalf("database: %s = %d, memory %d", k, snap.Stock[i], a.in.Service.State().Stock(k))
			}
		}
	}
	oa, err := a.in.Store.Orders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.in.Store.Orders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(oa) == 0 || len(oa) != len(ob) {
		t.Fatalf("orders: %d and %d recorded", len(oa), len(ob))
	}
	for i := range oa {
		if i >= len(ob) || oa[i] != ob[i] {
			t.Fatalf("order %d: %+v and %+v", i, oa[i], ob[min(i, len(ob)-1)])
		}
	}
	a.in.Store.Close()
	b.in.Store.Close()
}
