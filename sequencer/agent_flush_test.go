package sequencer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
)

// refusingServer's Flush fails with a non-fatal error while refusals
// last, and with err afterwards if set.
type refusingServer struct {
	transport.Server
	refusals atomic.Int64 // flushes left that fail with errRefused
	flushes  atomic.Int64
	closed   atomic.Bool
}

var errRefused = errors.New("test: network refused the datagram")

func (s *refusingServer) Flush() error {
	s.flushes.Add(1)
	if s.closed.Load() {
		return transport.ErrClosed
	}
	if s.refusals.Add(-1) >= 0 {
		return errRefused
	}
	return s.Server.Flush()
}

// A Flush error other than ErrClosed is loss, not the end of the
// sequencer: Run goes on; ErrClosed still ends it.
func TestAgent_FlushErrorIsNotFatal(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv := &refusingServer{Server: net.Server()}
	srv.refusals.Store(10)
	a, err := NewAgent(testConfig(), srv, SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	for srv.flushes.Load() < 20 {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v after %d flushes, 10 of them refused; want it to go on", err, srv.flushes.Load())
		case <-time.After(time.Millisecond):
		}
	}
	srv.closed.Store(true)
	select {
	case err := <-done:
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Run on a closed transport = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after its transport closed")
	}
}
