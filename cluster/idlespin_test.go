package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
)

// waitLog notes the wait of every Poll and says it delivered one frame
// on the first (no frame is handed over: only the count matters to
// transport.Idle).
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitLog) poll(d time.Duration) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	if len(w.waits) == 1 {
		return 1
	}
	return 0
}

func (w *waitLog) after(n int) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waits) <= n {
		return nil
	}
	return append([]time.Duration(nil), w.waits[1:n+1]...)
}

type spinClient struct {
	standbytest.Client
	log *waitLog
}

func (c *spinClient) Poll(_ transport.Handler, d time.Duration) (int, error) {
	return c.log.poll(d), nil
}

type spinServer struct {
	transport.Server
	log *waitLog
}

func (s *spinServer) Poll(_ transport.Handler, d time.Duration) (int, error) {
	return s.log.poll(d), nil
}

// TestStandby_IdleSpin: with IdleSpin (sequencer.idle-spin) a standby
// polls without blocking after a frame; without it, it blocks until its
// next timed work. The flag used to reach only a standalone sequencer.
func TestStandby_IdleSpin(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Hour} {
		cfg := standbyConfig(t, 2)
		cfg.IdleSpin = spin
		log := &waitLog{}
		s := newStandby(t, cfg, &spinClient{log: log})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		var waits []time.Duration
		for waits == nil {
			time.Sleep(time.Millisecond)
			waits = log.after(5)
		}
		cancel()
		<-done
		for i, w := range waits {
			if spin > 0 && w != 0 {
				t.Fatalf("spin %v: poll %d after a frame waits %v, want 0 (spinning)", spin, i+1, w)
			}
		}
		if spin == 0 && waits[len(waits)-1] == 0 {
			t.Fatalf("no spin: every poll after the frame waits 0 (%v): the standby never blocks", waits)
		}
	}
}

// TestPrimaryShell_IdleSpin: the primary's turn spins after a frame with
// MemberConfig.IdleSpin, and blocks up to maxPrimaryWait without it.
func TestPrimaryShell_IdleSpin(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Hour} {
		net, err := mem.NewNetwork(mem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := sequencer.DefaultConfig()
		cfg.Session, cfg.Standalone = 7, false
		cfg.RingBytes = 1 << 20
		log := &waitLog{}
		srv := &spinServer{Server: net.Server(), log: log}
		core, err := sequencer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var mono int64
		n := &Member{cfg: MemberConfig{IdleSpin: spin}, deps: Deps{Clock: func() sequencer.Time {
			mono += 1000
			return sequencer.Time{Mono: mono, Wall: 1_700_000_000_000_000_000 + mono}
		}}}
		acks := NewQuorumAcks(Epoch{Session: 7, Epoch: 1, FirstSeq: 1, Self: 1, Members: []fsm.Member{{ID: 1}, {ID: 2}, {ID: 3}}})
		sh := newPrimaryShell(n, core, srv, acks)
		for range 4 {
			if _, err := sh.turn(); err != nil {
				t.Fatal(err)
			}
		}
		waits := log.after(3)
		for i, w := range waits {
			want := maxPrimaryWait
			if spin > 0 {
				want = 0
			}
			if w != want {
				t.Fatalf("spin %v: turn %d after a frame polls with wait %v, want %v", spin, i+2, w, want)
			}
		}
	}
}
