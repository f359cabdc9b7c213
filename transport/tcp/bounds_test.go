package tcp

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// queuedBytes is what the server holds for its connections and has not
// written yet (endpoint goroutine only).
func queuedBytes(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.live {
		n += len(c.out)
		c.mu.Lock()
		n += len(c.queued) + c.inflight
		c.mu.Unlock()
	}
	return n
}

// Subscribers that connect and never read cost the server a bounded
// amount each, however fast it publishes: their queues are cut at
// MaxQueueBytes and the connections closed, counted, and logged in one
// line, not one per connection.
func TestServer_IdleSubscribersBoundedAtFullRate(t *testing.T) {
	cfg, logs := testConfig(t)
	s := newServer(t, cfg)
	const idle = 4
	for range idle {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close() // never read
	}
	waitClients(t, s, idle)
	frame := make([]byte, 16<<10)
	bound := idle * (cfg.MaxQueueBytes + len(frame) + lenPrefixBytes)
	peak := 0
	for i := 0; s.Drops().SlowClients < idle; i++ {
		if i == 1<<16 { // 1 GiB published
			t.Fatalf("after %d frames only %d of %d idle subscribers cut off", i, s.Drops().SlowClients, idle)
		}
		if err := s.Publish(frame); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, queuedBytes(s))
		if peak > bound {
			t.Fatalf("server holds %d bytes for %d idle subscribers, bound %d", peak, idle, bound)
		}
	}
	t.Logf("peak queued %d bytes for %d idle subscribers (bound %d)", peak, idle, bound)
	eventually(t, "idle subscribers gone", s, ignore, func() bool { return s.Clients() == 0 })
	if n := strings.Count(logs.String(), "tcp: connections closed"); n != 1 {
		t.Fatalf("%d log lines for %d connections closed within one interval, want 1:\n%s", n, idle, logs)
	}
	if !strings.Contains(logs.String(), ErrSlowClient.Error()) {
		t.Fatalf("log does not give the reason %q:\n%s", ErrSlowClient, logs)
	}
}

// At a moderate rate, a subscriber that does not read is cut once it
// holds more than SlowClientBytes (default 4 MiB) with no progress for
// SlowClientTimeout, long before MaxQueueBytes.
func TestServer_IdleSubscriberCutWhenStalled(t *testing.T) {
	cfg, _ := testConfig(t)
	if cfg.SlowClientBytes != 4<<20 {
		t.Fatalf("default SlowClientBytes = %d, want 4 MiB", cfg.SlowClientBytes)
	}
	cfg.SlowClientTimeout = 100 * time.Millisecond
	s := newServer(t, cfg)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close() // never reads
	waitClients(t, s, 1)
	frame := make([]byte, 8<<10)
	peak := 0
	deadline := time.Now().Add(60 * time.Second)
	for s.Drops().SlowClients == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle subscriber not cut after 60s; holding %d bytes", queuedBytes(s))
		}
		s.Publish(frame)
		s.Flush()
		peak = max(peak, queuedBytes(s))
		time.Sleep(time.Millisecond) // at most 8 MB/s
	}
	if peak >= cfg.MaxQueueBytes {
		t.Fatalf("cut at %d bytes: by MaxQueueBytes, not by the stall rule", peak)
	}
	t.Logf("cut at %d bytes held (SlowClientBytes %d)", peak, cfg.SlowClientBytes)
}

// A subscriber that reads is not cut for a burst above SlowClientBytes
// (a 16 MiB message is one), as long as it stays below MaxQueueBytes.
func TestServer_ReadingSubscriberSurvivesLargeBurst(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.MaxFrameBytes = MinMaxFrameBytes
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	frame := make([]byte, 64000)
	const frames = 16 << 20 / 64000
	for range frames {
		if err := s.Publish(frame); err != nil {
			t.Fatal(err)
		}
	}
	s.Flush()
	got := 0
	deadline := time.Now().Add(liveness)
	for got < frames && time.Now().Before(deadline) {
		n, err := c.Poll(ignore, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got += n
		s.Poll(ignore, 0)
	}
	if got != frames || s.Drops().SlowClients != 0 {
		t.Fatalf("reader got %d of %d frames of a 16 MiB burst; drops %+v", got, frames, s.Drops())
	}
}

// Connections beyond MaxConns are closed at once and counted; the Peer of
// a closed connection never reaches the next one in its slot.
func TestServer_MaxConnsAndStalePeer(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.MaxConns = 1
	s := newServer(t, cfg)
	peerOf := func(c *Client, what string) transport.Peer {
		t.Helper()
		if err := c.Send([]byte(what)); err != nil {
			t.Fatal(err)
		}
		c.Flush()
		var r recorder
		eventually(t, what, s, r.handle, func() bool { return len(r.frames) == 1 })
		return r.from[0]
	}
	a := dial(t, cfg, s)
	waitClients(t, s, 1)
	pa := peerOf(a, "from a")
	a.Close()
	eventually(t, "a gone", s, ignore, func() bool { return s.Clients() == 0 })
	b := dial(t, cfg, s)
	// b may have been refused (see below): it finds out, and redials, in
	// its Poll, which reads its socket.
	eventually(t, "b connected", s, ignore, func() bool {
		if _, err := b.Poll(ignore, 0); err != nil {
			t.Fatal(err)
		}
		return s.Clients() == 1 && b.Connected()
	})
	pb := peerOf(b, "from b")
	if pa == pb {
		t.Fatalf("a closed connection and its successor share Peer %d", pa)
	}

	// A third connection is over the limit: closed at once, counted. (b's
	// own first dial may have been refused already, if a's slot was freed
	// just after Clients said 0: b then redials; count from here.)
	refused := s.Drops().RefusedConns
	raw, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetReadDeadline(time.Now().Add(liveness))
	if _, err := raw.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a connection beyond MaxConns=1: read = %v, want it closed", err)
	}
	if d := s.Drops(); d.RefusedConns != refused+1 {
		t.Fatalf("Drops = %+v, want RefusedConns %d", d, refused+1)
	}

	// A reply to a's stale Peer is dropped and counted, not sent to b.
	dropped := s.Counters().Dropped
	if err := s.SendTo(pa, []byte("for a")); err != nil {
		t.Fatal(err)
	}
	if err := s.SendTo(pb, []byte("for b")); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	var r recorder
	eventually(t, "reply to b", b, r.handle, func() bool { return len(r.frames) >= 1 })
	if n, _ := b.Poll(r.handle, 50*time.Millisecond); n != 0 || len(r.frames) != 1 || string(r.frames[0]) != "for b" {
		t.Fatalf("b got %q, want only its own reply", r.frames)
	}
	if got := s.Counters().Dropped - dropped; got != 1 {
		t.Fatalf("Dropped rose by %d for a reply to a closed connection's Peer, want 1", got)
	}
}

// failListener hands out connections whose writes fail once armed.
type failListener struct {
	net.Listener
	fail atomic.Bool
}

type failConn struct {
	net.Conn
	l *failListener
}

func (c failConn) Write(p []byte) (int, error) {
	if c.l.fail.Load() {
		return 0, syscall.EPIPE
	}
	return c.Conn.Write(p)
}

func (l *failListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.fail.Load() {
		return nc, nil // connections after the failing one write normally
	}
	return failConn{nc, l}, nil
}

// A write to one connection that fails ends that connection only: it is
// counted (Drops.WriteFailures, Counters.Refused), Publish and Flush do
// not fail, and the other clients keep receiving.
func TestServer_WriteFailureDropsOnlyThatConnection(t *testing.T) {
	cfg, logs := testConfig(t)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	fl := &failListener{Listener: ln}
	s, err := serveOn(cfg, fl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg.Addr = ln.Addr().String()
	bad := dial(t, cfg, s)
	_ = bad
	waitClients(t, s, 1)
	fl.fail.Store(true)
	good := dial(t, cfg, s)
	waitClients(t, s, 2)

	var r recorder
	for i := 0; len(r.frames) < 100; i++ {
		if i > 100000 {
			t.Fatalf("good client got %d frames", len(r.frames))
		}
		if err := s.Publish([]byte("frame")); err != nil {
			t.Fatalf("Publish = %v", err)
		}
		if err := s.Flush(); err != nil {
			t.Fatalf("Flush = %v", err)
		}
		if _, err := good.Poll(r.handle, time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "failed connection closed", s, ignore, func() bool { return s.Drops().WriteFailures == 1 })
	if c := s.Counters(); c.Refused != 1 {
		t.Fatalf("Counters.Refused = %d, want 1 (the connection whose write failed)", c.Refused)
	}
	// The counter rises before the connection's goroutine logs.
	eventually(t, "reason logged", s, ignore, func() bool { return strings.Contains(logs.String(), syscall.EPIPE.Error()) })
}
