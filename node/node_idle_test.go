package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/transport/transporttest"
)

// waitRecorder records the wait of every Poll and returns at once.
type waitRecorder struct {
	transport.Client
	mu     sync.Mutex
	waits  []time.Duration
	stopAt int
	cancel func()
}

func (c *waitRecorder) Poll(h transport.Handler, wait time.Duration) (int, error) {
	c.mu.Lock()
	c.waits = append(c.waits, wait)
	if len(c.waits) == c.stopAt {
		c.cancel()
	}
	c.mu.Unlock()
	return c.Client.Poll(h, 0)
}

func (c *waitRecorder) Wake() { c.Client.(transport.Waker).Wake() }

// An idle node blocks until its next timed work (here none: a read-only
// node; then a resend), not for 1 ms at a time, which cost an idle
// `seqd tail` 7.5% of a core; and never past that work.
func TestNode_IdleWaitsUntilItsNextTimedWork(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		net, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cl := &waitRecorder{Client: net.Client(), stopAt: 200, cancel: cancel}
		cfg := DefaultConfig()
		cfg.ReadOnly = readOnly
		if !readOnly {
			cfg.Account = "A"
		}
		n, err := New(cfg, nopHandler{}, cl)
		if err != nil {
			t.Fatal(err)
		}
		if !readOnly {
			// No sequencer: the command stays unacked and is resent.
			if _, err := n.SendString("x"); err != nil {
				t.Fatal(err)
			}
		}
		_ = n.Run(ctx)
		cancel()
		long := 0
		for i, w := range cl.waits {
			if !readOnly && w > cfg.MaxResendInterval {
				t.Fatalf("sending node: poll %d waits %v, beyond the longest resend interval", i, w)
			}
			if w > time.Millisecond {
				long++
			}
		}
		if long < len(cl.waits)/2 {
			t.Fatalf("read-only %v: only %d of %d idle polls wait more than 1ms (waits %v...)", readOnly, long, len(cl.waits), cl.waits[:10])
		}
	}
}

// A busy Run loop passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestNode_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		net, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cl := &waitRecorder{Client: net.Client(), stopAt: 2000, cancel: cancel}
		cfg := DefaultConfig()
		cfg.ReadOnly = true
		n, err := New(cfg, nopHandler{}, cl)
		if err != nil {
			t.Fatal(err)
		}
		var mono int64
		n.clock = func() int64 { mono += int64(tc.Step); return mono }
		_ = n.Run(ctx)
		cancel()
		tc.Check(t, n.run.Yields(), time.Duration(mono))
	}
}
