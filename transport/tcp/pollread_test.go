package tcp

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
)

// unread is how many bytes wait in nc's kernel receive queue (SIOCINQ).
func unread(t *testing.T, nc syscall.Conn) int {
	t.Helper()
	raw, err := nc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	if err := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sysConn is c's socket: out of the netpoller (see detach), or as dialled.
func sysConn(c *conn) syscall.Conn {
	if c.file != nil {
		return c.file
	}
	return c.nc.(syscall.Conn)
}

// waitUntil waits, without polling anything, until cond holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, liveness)
		}
		time.Sleep(time.Millisecond)
	}
}

// The goroutine that polls reads the sockets itself: frames sent to an
// endpoint that does not poll stay in its socket's kernel queue (no reader
// goroutine takes them, wakes, and hands them over: two goroutine wake-ups
// per frame that made TCP's round trip 1.7-2.2 times UDP's), and its next
// Poll delivers them all, intact and in order, on both sides.
func TestPoll_ReadsTheSocketsOnThePollingGoroutine(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	s.mu.Lock()
	serverSide := sysConn(s.live[0])
	s.mu.Unlock()
	clientSide := sysConn(c.cur.Load())

	const frames = 100
	want := 0
	for i := range frames {
		f := numbered(i, 200)
		want += lenPrefixBytes + len(f)
		if err := c.Send(f); err != nil {
			t.Fatal(err)
		}
		if err := s.Publish(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the client's frames wait in the server's socket", func() bool { return unread(t, serverSide) == want })
	waitUntil(t, "the server's frames wait in the client's socket", func() bool { return unread(t, clientSide) == want })
	// and stay there: nothing else reads them. (A reader goroutine would
	// have taken them by now; on a machine so loaded that it had not,
	// this passes without proving anything, never the reverse.)
	time.Sleep(50 * time.Millisecond)
	if sn, cn := unread(t, serverSide), unread(t, clientSide); sn != want || cn != want {
		t.Fatalf("unread bytes: server's socket %d, client's %d; want %d each: something read them before Poll", sn, cn, want)
	}

	for _, side := range []struct {
		name string
		p    interface {
			Poll(transport.Handler, time.Duration) (int, error)
		}
		nc syscall.Conn
	}{{"server", s, serverSide}, {"client", c, clientSide}} {
		var r recorder
		if n, err := side.p.Poll(r.handle, time.Second); err != nil || n != frames {
			t.Fatalf("%s: Poll = %d, %v; want %d frames at once", side.name, n, err, frames)
		}
		for i := range frames {
			if !bytes.Equal(r.frames[i], numbered(i, 200)) {
				t.Fatalf("%s: frame %d arrived changed or out of order", side.name, i)
			}
		}
		if n := unread(t, side.nc); n != 0 {
			t.Fatalf("%s: %d bytes left in the socket after Poll", side.name, n)
		}
	}
}

// BenchmarkRoundTrip: a client sends a 256-byte frame, the server (on its
// own goroutine) sends it back, the client waits for it; one op is one
// round trip over loopback.
func BenchmarkRoundTrip(b *testing.B) {
	cfg := benchConfig()
	s := newServer(b, cfg)
	c := dial(b, cfg, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		echo := func(frame []byte, from transport.Peer) { _ = s.SendTo(from, frame) }
		for {
			if _, err := s.Poll(echo, 10*time.Millisecond); err != nil {
				return
			}
		}
	}()
	frame := make([]byte, 256)
	got := 0
	h := func([]byte, transport.Peer) { got++ }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = c.Send(frame)
		for want := got + 1; got < want; {
			if _, err := c.Poll(h, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	s.Close()
	<-done
}
