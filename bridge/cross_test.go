package bridge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
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

// startSequencer runs a sequencer of its own session on groups of its
// own and returns them.
func startSequencer(t *testing.T, ctx context.Context, session uint64) multicast.Config {
	t.Helper()
	mc := multicast.DefaultConfig()
	a, b := 1+rand.IntN(250), 1+rand.IntN(250)
	mc.StreamGroup = fmt.Sprintf("239.93.%d.%d:%d", a, b, udpPort(t))
	mc.CommandGroup = fmt.Sprintf("239.94.%d.%d:%d", a, b, udpPort(t))
	srv, err := multicast.NewServer(mc)
	if err != nil {
		t.Skipf("no multicast here: %v", err)
	}
	t.Cleanup(func() { srv.Close() }) // runs after runSequencer's wait
	runSequencer(t, ctx, srv, session)
	return mc
}

type crossRecorder struct {
	got  [2][]string // each stream's own payloads, in delivery order
	seqs [2][]uint64
	busy bool
	bad  int // handler calls that overlapped (must be none)
}

func (r *crossRecorder) OnStreamMessage(stream int, m *node.Message) {
	if r.busy {
		r.bad++
	}
	r.busy = true
	if m.Mine() && !m.Internal() {
		r.got[stream] = append(r.got[stream], string(m.Payload))
		r.seqs[stream] = append(r.seqs[stream], m.Seq)
	}
	r.busy = false
}

// A cross-connect node reads two independent sequencers' streams and
// sends to each: the handler is told which stream each message is of,
// each stream's order holds, and each command is delivered once, on the
// stream it was sent to.
func TestCross_TwoStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	groups := []multicast.Config{startSequencer(t, runCtx, 71), startSequencer(t, runCtx, 72)}
	var cfgs []node.Config
	var clients []transport.Client
	for _, mc := range groups {
		c, err := multicast.NewClient(mc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cfg := node.DefaultConfig()
		cfg.Account = "XCONN"
		cfgs, clients = append(cfgs, cfg), append(clients, c)
	}
	rec := &crossRecorder{}
	x, err := NewCross(cfgs, clients, rec)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- x.Run(runCtx) }()
	want := [2]int{60, 40}
	for s := 0; s < 2; s++ {
		for i := 0; i < want[s]; i++ {
			if _, err := x.Node(s).SendContext(ctx, []byte(fmt.Sprintf("s%d-%03d", s, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		x.mu.Lock()
		n0, n1 := len(rec.got[0]), len(rec.got[1])
		x.mu.Unlock()
		if n0 >= want[0] && n1 >= want[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d and %d, want %v", n0, n1, want)
		}
	}
	stop()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for s := 0; s < 2; s++ {
		if len(rec.got[s]) != want[s] {
			t.Fatalf("stream %d: %d messages, want %d", s, len(rec.got[s]), want[s])
		}
		for i, p := range rec.got[s] {
			if w := fmt.Sprintf("s%d-%03d", s, i); p != w {
				t.Fatalf("stream %d message %d: %q, want %q", s, i, p, w)
			}
			if i > 0 && rec.seqs[s][i] <= rec.seqs[s][i-1] {
				t.Fatalf("stream %d: seq %d after %d", s, rec.seqs[s][i], rec.seqs[s][i-1])
			}
		}
	}
	if rec.bad != 0 {
		t.Fatalf("%d overlapping handler calls", rec.bad)
	}
}
