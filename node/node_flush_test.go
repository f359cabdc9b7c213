package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
)

// refusingClient's Flush fails with a non-fatal error while refusals
// last, then with ErrClosed once closed is set.
type refusingClient struct {
	transport.Client
	refusals atomic.Int64
	flushes  atomic.Int64
	closed   atomic.Bool
}

var errRefused = errors.New("test: network refused the datagram")

func (c *refusingClient) Flush() error {
	c.flushes.Add(1)
	if c.closed.Load() {
		return transport.ErrClosed
	}
	if c.refusals.Add(-1) >= 0 {
		return errRefused
	}
	return c.Client.Flush()
}

type nopHandler struct{}

func (nopHandler) OnMessage(*Message) {}

// A Flush error other than ErrClosed is loss, not the end of the node: Run
// goes on (commands are resent until acked); ErrClosed still ends it.
func TestNode_FlushErrorIsNotFatal(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cl := &refusingClient{Client: net.Client()}
	cl.refusals.Store(10)
	cfg := DefaultConfig()
	cfg.Account = "A"
	n, err := New(cfg, nopHandler{}, cl)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	for cl.flushes.Load() < 20 {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v after %d flushes, 10 of them refused; want it to go on", err, cl.flushes.Load())
		case <-time.After(time.Millisecond):
		}
	}
	cl.closed.Store(true)
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Run on a closed transport = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after its transport closed")
	}
}
