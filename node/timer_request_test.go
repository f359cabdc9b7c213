package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/mem"
)

// mineRecorder records the cmdSeq of each of the node's own messages.
type mineRecorder struct {
	mu   sync.Mutex
	seqs []uint64
	got  chan struct{}
}

func (r *mineRecorder) OnMessage(m *Message) {
	if !m.Mine() || m.Internal() {
		return
	}
	r.mu.Lock()
	r.seqs = append(r.seqs, m.CmdSeq)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func runEchoNode(t *testing.T, h Handler) (*Node, context.CancelFunc) {
	t.Helper()
	network, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	seqr := newEchoSequencer(t, network.Server())
	go seqr.run(ctx)
	n, err := New(testConfig(), h, network.Client())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { _ = n.Run(ctx) }()
	return n, cancel
}

// TestNode_NegativeTimerPeriodIsRefusedWithoutUsingACommandSeq: a
// periodic timer with a negative period is an error at the call, and it
// uses no command seq: the next Send returns the cmdSeq that its message
// carries in the stream. Before, SetPeriodicTimer returned (1, nil), the
// core refused the request, and every later Send returned a number one
// above the one on the wire (issue 14, item 9).
func TestNode_NegativeTimerPeriodIsRefusedWithoutUsingACommandSeq(t *testing.T) {
	h := &mineRecorder{got: make(chan struct{}, 1)}
	n, cancel := runEchoNode(t, h)
	defer cancel()
	q, err := n.SetPeriodicTimer(7, 0, -time.Second)
	if !errors.Is(err, ErrTimer) || q != 0 {
		t.Errorf("SetPeriodicTimer(period -1s) = (%d, %v), want (0, ErrTimer)", q, err)
	}
	sent, err := n.SendString("x")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.got:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatalf("stuck: %+v", n.Stats())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seqs) != 1 || h.seqs[0] != sent {
		t.Fatalf("Send returned %d; the stream carries cmdSeq %v", sent, h.seqs)
	}
}

// TestNode_TimerSetBeforeTheFirstMessageIsRefused: SetTimer schedules
// relative to sequencer time, which a node learns from the stream; before
// the first message there is none, and the request is refused with an
// error that says so. Before, it asked for Now()+after with Now() = 0 (a
// time in 1970), and the timer fired at once (issue 14, item 9).
func TestNode_TimerSetBeforeTheFirstMessageIsRefused(t *testing.T) {
	h := &mineRecorder{got: make(chan struct{}, 1)}
	n, cancel := runEchoNode(t, h)
	defer cancel()
	q, err := n.SetTimer(1, 5*time.Second)
	if !errors.Is(err, ErrTimeUnknown) || q != 0 {
		t.Fatalf("SetTimer before the first message = (%d, %v), want (0, ErrTimeUnknown)", q, err)
	}
	t.Log(err)
	// Once the stream told the time, SetTimer asks for that time + after.
	if _, err := n.SendString("x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.got:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatalf("stuck: %+v", n.Stats())
	}
	for n.Now() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := n.SetTimer(1, 5*time.Second); err != nil {
		t.Fatalf("SetTimer after the first message: %v", err)
	}
}
