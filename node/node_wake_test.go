package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// scriptedClient hands one scripted frame to each Poll (and nothing once
// they are used up), counting Wakes; it sends nowhere.
type scriptedClient struct {
	frames [][]byte
	wakes  atomic.Int64
	polls  int
	cancel func()
}

func (c *scriptedClient) Send([]byte) error { return nil }
func (c *scriptedClient) Flush() error      { return nil }
func (c *scriptedClient) Close() error      { return nil }
func (c *scriptedClient) Wake()             { c.wakes.Add(1) }

func (c *scriptedClient) Poll(h transport.Handler, _ time.Duration) (int, error) {
	c.polls++
	if len(c.frames) == 0 {
		c.cancel()
		return 0, nil
	}
	f := c.frames[0]
	c.frames = c.frames[1:]
	h(f, transport.NoPeer)
	return 1, nil
}

// A command sent from OnMessage (the rtt node's pattern) runs on the Run
// goroutine, which is not blocked: it must not wake the Poll it is in,
// each wake an eventfd write and a read, two system calls per message.
func TestNode_CallbackSendDoesNotWakeItsOwnPoll(t *testing.T) {
	s := newStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := &scriptedClient{cancel: cancel}
	for q := uint64(1); q <= 20; q++ {
		cl.frames = append(cl.frames, s.msgs(q, 1))
	}
	cfg := DefaultConfig()
	cfg.Account = "A"
	cfg.Window = 64
	var n *Node
	sent := 0
	h := &recorder{onMessage: func(*Message) {
		if _, err := n.TrySendString("x"); err != nil {
			t.Errorf("TrySend: %v", err)
		}
		sent++
	}}
	n, err := New(cfg, h, cl)
	if err != nil {
		t.Fatal(err)
	}
	_ = n.Run(ctx)
	if sent != 20 {
		t.Fatalf("sent %d from callbacks, want 20", sent)
	}
	if w := cl.wakes.Load(); w != 0 {
		t.Fatalf("%d wakes for %d sends from callbacks, want none", w, sent)
	}
}
