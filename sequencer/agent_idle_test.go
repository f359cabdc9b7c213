package sequencer

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/transport/transporttest"
)

// waitRecorder records the wait of every Poll and returns at once, so Run
// spins through its loop on a fake clock.
type waitRecorder struct {
	transport.Server
	waits   []time.Duration
	stopAt  int
	cancel  func()
	publish int
}

func (s *waitRecorder) Poll(h transport.Handler, wait time.Duration) (int, error) {
	s.waits = append(s.waits, wait)
	if len(s.waits) == s.stopAt {
		s.cancel()
	}
	return s.Server.Poll(h, 0)
}

func (s *waitRecorder) Publish(frame []byte) error {
	s.publish++
	return s.Server.Publish(frame)
}

// An idle agent blocks until its next heartbeat is due, not for 1 ms at a
// time (15% of a core on an idle sequencer), and never past it: heartbeats
// keep their interval.
func TestAgent_IdleWaitsUntilTheNextHeartbeat(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.MaxHeartbeatInterval = 0 // a fixed interval: TestAgent_IdleWaitsLongerAsHeartbeatsBackOff has the other
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &waitRecorder{Server: net.Server(), stopAt: 2000, cancel: cancel}
	const step = 100 * time.Microsecond // the fake clock moves this much per reading
	var mono int64
	a, err := NewAgent(cfg, srv, func() Time { mono += int64(step); return at(mono) })
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Run(ctx)
	long := 0
	for i, w := range srv.waits {
		if w > cfg.HeartbeatInterval {
			t.Fatalf("poll %d waits %v, beyond the heartbeat interval %v", i, w, cfg.HeartbeatInterval)
		}
		if w > time.Millisecond {
			long++
		}
	}
	// Waits count down from the interval to 0 at 0.1 ms per loop: most
	// are well above 1 ms.
	if long < len(srv.waits)*3/4 {
		t.Fatalf("only %d of %d idle polls wait more than 1ms (waits %v...)", long, len(srv.waits), srv.waits[:20])
	}
	// 2000 loops of 0.1 ms are 200 ms of fake time: about 20 heartbeats.
	elapsed := time.Duration(mono)
	if want := int(elapsed / cfg.HeartbeatInterval); srv.publish < want-2 || srv.publish > want+3 {
		t.Fatalf("%d heartbeats in %v at interval %v, want about %d", srv.publish, elapsed, cfg.HeartbeatInterval, want)
	}
}

// With heartbeats backing off, an idle agent sleeps through the longer
// intervals too: fewer wake-ups, never past the next heartbeat.
func TestAgent_IdleWaitsLongerAsHeartbeatsBackOff(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.HeartbeatInterval = 10 * time.Millisecond
	cfg.MaxHeartbeatInterval = 40 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &waitRecorder{Server: net.Server(), stopAt: 4000, cancel: cancel}
	const step = 100 * time.Microsecond
	var mono int64
	a, err := NewAgent(cfg, srv, func() Time { mono += int64(step); return at(mono) })
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Run(ctx)
	longest := time.Duration(0)
	for i, w := range srv.waits {
		if w > cfg.MaxHeartbeatInterval {
			t.Fatalf("poll %d waits %v, beyond the longest heartbeat interval %v", i, w, cfg.MaxHeartbeatInterval)
		}
		longest = max(longest, w)
	}
	if longest <= cfg.HeartbeatInterval {
		t.Fatalf("longest idle wait %v: the agent never slept through a backed-off interval", longest)
	}
	// 400 ms of fake time: heartbeats at 10, 30, 70, then every 40 ms:
	// about 11, where a fixed interval gives 40.
	elapsed := time.Duration(mono)
	want := 3 + int((elapsed-70*time.Millisecond)/cfg.MaxHeartbeatInterval)
	if srv.publish < want-2 || srv.publish > want+2 {
		t.Fatalf("%d heartbeats in %v, want about %d", srv.publish, elapsed, want)
	}
}

// A busy agent passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestAgent_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		net, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		srv := &waitRecorder{Server: net.Server(), stopAt: 2000, cancel: cancel}
		var mono int64
		a, err := NewAgent(testConfig(), srv, func() Time { mono += int64(tc.Step); return at(mono) })
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Run(ctx)
		cancel()
		tc.Check(t, a.run.Yields(), time.Duration(mono))
	}
}
