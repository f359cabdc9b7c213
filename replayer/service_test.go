package replayer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
)

func udpPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// testLog sends a logger's lines to t.Log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// seqRecorder records the seqs and payload sizes a node delivers.
type seqRecorder struct {
	mu    sync.Mutex
	seqs  []uint64
	sizes []int
	n     *node.Node
}

func (r *seqRecorder) OnMessage(m *node.Message) {
	r.mu.Lock()
	r.seqs = append(r.seqs, m.Seq)
	r.sizes = append(r.sizes, len(m.Payload))
	r.mu.Unlock()
}

func (r *seqRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seqs)
}

// waitFor polls cond until it holds or the test's deadline.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestService_FollowsPersistsAndAnswers runs a sequencer (a ring of 64
// packets), a Service and nodes in one process over UDP multicast on
// loopback: the service stores the stream as a node sends 3000
// commands; a reader that joins afterwards, from seq 1, gets Gone from
// the ring and the whole stream from the service's NAK endpoint; Do runs
// on the service's goroutine; cancelling Run leaves the store fsynced
// and closed.
func TestService_FollowsPersistsAndAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mc := multicast.DefaultConfig()
	a, b := 1+rand.IntN(250), 1+rand.IntN(250)
	mc.StreamGroup = fmt.Sprintf("239.83.%d.%d:%d", a, b, udpPort(t))
	mc.CommandGroup = fmt.Sprintf("239.84.%d.%d:%d", a, b, udpPort(t))

	srv, err := multicast.NewServer(mc)
	if err != nil {
		t.Skipf("no multicast here: %v", err)
	}
	defer srv.Close()
	scfg := sequencer.DefaultConfig()
	scfg.Session, scfg.Epoch = 99, 1
	scfg.MaxPacketBytes = 1472
	scfg.RingBytes = 64 * 1472
	agent, err := sequencer.NewAgent(scfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(runCtx) }()

	follow, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Close()
	naks, err := multicast.NewRepairServer(mc, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer naks.Close()
	cfg := replayer.DefaultServiceConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	svc, err := replayer.NewService(cfg, follow, naks)
	if err != nil {
		t.Fatal(err)
	}
	svcCtx, stopSvc := context.WithCancel(runCtx)
	svcErr := make(chan error, 1)
	go func() { svcErr <- svc.Run(svcCtx) }()

	// A sender.
	cl, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ncfg := node.DefaultConfig()
	ncfg.Account = "SEND"
	ncfg.BlockWhenFull = true
	sender := &seqRecorder{}
	if sender.n, err = node.New(ncfg, sender, cl); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = sender.n.Run(runCtx) }()
	// The service has no repair source but the sequencer's ring (64
	// packets): what it misses (a drop, or its goroutine kept off a
	// loaded machine's cores while the sender streams) must still be in
	// the ring when it asks. So the sender sends a batch of fewer
	// commands than the ring holds packets, then waits until the service
	// has stored all that is sequenced, instead of assuming it keeps up.
	const count, batch = 3000, 32
	p := make([]byte, 300)
	for i := 0; i < count; i++ {
		if i%batch == 0 && i > 0 {
			waitFor(t, ctx, "the sender's batch in the stream", func() bool { return sender.count() >= i })
			seq := agent.LastSeq()
			waitFor(t, ctx, "the service to store the batch", func() bool { return svc.Contiguous() >= seq })
		}
		if _, err := sender.n.SendContext(ctx, p[:20+i%250]); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "the sender's commands in the stream", func() bool { return sender.count() >= count })
	last := agent.LastSeq()
	waitFor(t, ctx, "the service to store the stream", func() bool { return svc.Contiguous() >= last })

	var held uint64
	if err := svc.Do(ctx, func(s *replayer.Store) { held = s.Contiguous() }); err != nil || held < last {
		t.Fatalf("Do: %v, store holds %d, want >= %d", err, held, last)
	}

	// A late reader from seq 1: the ring says Gone, the service answers.
	rcl, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	rcfg := node.DefaultConfig()
	rcfg.ReadOnly, rcfg.Rewind = true, true
	rcfg.Replayers = []string{naks.LocalAddr().String()}
	reader := &seqRecorder{}
	if reader.n, err = node.New(rcfg, reader, rcl); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() { readErr <- reader.n.Run(runCtx) }()
	for reader.count() < int(last) {
		select {
		case err := <-readErr:
			t.Fatalf("reader stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("reader delivered %d of %d", reader.count(), last)
		case <-time.After(5 * time.Millisecond):
		}
	}
	reader.mu.Lock()
	for i, q := range reader.seqs[:last] {
		if q != uint64(i+1) {
			t.Fatalf("reader: seq %d at position %d", q, i)
		}
	}
	reader.mu.Unlock()
	// Node.Stats is a snapshot the shell refreshes now and then, so the
	// reader may have delivered everything before it shows the switch.
	waitFor(t, ctx, "the reader's stats to show it moved to the replayer after a Gone",
		func() bool { return reader.n.Stats().SourceSwitches > 0 })

	stopSvc()
	if err := <-svcErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	st := svc.Stats()
	if st.Naks.Naks == 0 || st.Naks.Retransmitted == 0 || st.Durable != st.Contiguous || st.Contiguous < last {
		t.Fatalf("service stats %+v: want NAKs answered and everything held durable", st)
	}
	if err := svc.Do(ctx, func(*replayer.Store) {}); !errors.Is(err, replayer.ErrServiceClosed) {
		t.Fatalf("Do after Run: %v, want ErrServiceClosed", err)
	}
}
