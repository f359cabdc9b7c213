package cluster

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// TestCluster_SafeRoundTripLogged logs (asserts nothing about time) the
// round trip of one command to its delivery by a safe-mode tail over
// loopback multicast: a standalone primary, and a primary with two
// standbys acking what they wrote and what they fsynced. Run with -v:
//
//	go test -run TestCluster_SafeRoundTripLogged -v ./cluster/
func TestCluster_SafeRoundTripLogged(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	for _, mode := range []string{"standalone", "written", "durable"} {
		t.Run(mode, func(t *testing.T) {
			mc := mcastConfig(t)
			tl := startTail(t, mc)
			var p *primary
			if mode == "standalone" {
				p = startStandalone(t, mc)
			} else {
				p = startPrimary(t, mc, 1, 1, 0, nil)
				for id := uint64(2); id <= 3; id++ {
					c, err := multicast.NewClient(mc)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					cfg := standbyConfig(t, id)
					cfg.AckWritten = mode == "written"
					s := newStandby(t, cfg, c)
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan struct{})
					go func() { defer close(done); _ = s.Run(ctx) }()
					t.Cleanup(func() { cancel(); <-done })
				}
			}
			_ = p
			snd := newSender(t, mc)
			snd.send(t, 1, 1, "the first delivery", func() bool { return tl.cmd() >= 1 })
			const n = 300
			rtt := make([]time.Duration, 0, n)
			var w wire.CommandWriter
			buf := make([]byte, 256)
			for q := uint64(2); q < n+2; q++ {
				if err := w.Reset(buf, standbytest.Alice, 1, 0, standbytest.Session); err != nil {
					t.Fatal(err)
				}
				if err := w.Append(&wire.Command{CmdSeq: q, Payload: []byte("ping")}); err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				var sent time.Time
				for ; tl.cmd() < q; runtime.Gosched() {
					if time.Since(sent) > 500*time.Millisecond {
						_ = snd.c.Send(w.Bytes())
						_ = snd.c.Flush()
						sent = time.Now()
					}
					if time.Since(t0) > 30*time.Second {
						t.Fatalf("command %d not delivered in 30s", q)
					}
				}
				rtt = append(rtt, time.Since(t0))
			}
			slices.Sort(rtt)
			t.Logf("%s: command -> safe delivery over loopback multicast, %d round trips: p50 %v p90 %v p99 %v",
				mode, n, rtt[n/2], rtt[n*9/10], rtt[n*99/100])
		})
	}
}

// startStandalone is a primary whose stable is what it published.
func startStandalone(t *testing.T, mc multicast.Config) *primary {
	t.Helper()
	srv, err := multicast.NewServer(mc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := standbytest.SeqConfig(1, 1)
	cfg.Standalone = true
	a, err := sequencer.NewAgent(cfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &primary{a: a, srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- a.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}
