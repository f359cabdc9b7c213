package cluster

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestPeerServer_IdleConnectionsHoldNoSlot: connections that never send a
// request do not keep a member's fetch from being answered at once, and
// beyond 4*MaxConns of them the oldest are closed. Before, MaxConns idle
// connections held every slot for IOTimeout each, over and over: a new
// primary's catch-up timed out (issue 16).
func TestPeerServer_IdleConnectionsHoldNoSlot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultPeerServerConfig()
	ps, err := NewPeerServer(cfg, nil, ln)
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve()
	defer ps.Close()
	idle := 4*cfg.MaxConns + 8
	for i := 0; i < idle; i++ {
		c, err := net.Dial("tcp", ps.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(50 * time.Millisecond) // let Serve accept them
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Fetch(ctx, ps.Addr().String(), 1, 5, func([]byte) error { return nil })
	if !errors.Is(err, ErrFetchRefused) {
		t.Fatalf("fetch behind %d idle connections: %v after %v; want ErrFetchRefused (no store) at once", idle, err, time.Since(start))
	}
	t.Logf("answered after %v", time.Since(start))
	if ps.Evicted() == 0 {
		t.Fatalf("%d idle connections, MaxConns %d: none evicted", idle, cfg.MaxConns)
	}
}
