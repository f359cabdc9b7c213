package ops

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestLimitListener_RefusesBeyondTheCap: an admin listener holds at most
// its cap of connections; one more is closed at once and counted, and a
// slot freed by a close is given again. Before, the admin endpoint kept
// every connection (issue 16: admin listener caps).
func TestLimitListener_RefusesBeyondTheCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewLimitListener(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a := <-accepted
	<-accepted
	third := dial()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := third.Read(b[:]); err == nil {
		t.Fatal("the connection beyond the cap was kept")
	}
	if n := ln.Refused(); n != 1 {
		t.Fatalf("Refused = %d, want 1", n)
	}
	a.Close()
	dial()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the slot freed by a close was not given again")
	}
}

// TestServe_AdminDeadlines: the admin HTTP server has read, write and
// idle deadlines, not only the header's.
func TestServe_AdminDeadlines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sv, err := Serve(ctx, NewSurface(Auth{}, nil, nil), Auth{}, "admin-addr", "127.0.0.1:0", "console-addr", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	if sv.http.ReadTimeout == 0 || sv.http.WriteTimeout == 0 || sv.http.IdleTimeout == 0 {
		t.Fatalf("admin server deadlines: read %v write %v idle %v", sv.http.ReadTimeout, sv.http.WriteTimeout, sv.http.IdleTimeout)
	}
	if _, ok := sv.httpLn.(*LimitListener); !ok {
		t.Fatalf("admin listener %T is not capped", sv.httpLn)
	}
}
