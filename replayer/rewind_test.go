package replayer

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// rewindClient asks srv for the stream from from and returns the reply
// and a reader of the frames.
func rewindClient(t *testing.T, addr string, session, from uint64, flags uint32) (net.Conn, *bufio.Reader, wire.RewindReply) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(wire.AppendRewindRequest(nil, &wire.RewindRequest{Session: session, FromSeq: from, Flags: flags})); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(c, 1<<16)
	var b [wire.RewindReplyBytes]byte
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(br, b[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	var rep wire.RewindReply
	if err := wire.DecodeRewindReply(b[:], &rep); err != nil {
		t.Fatal(err)
	}
	return c, br, rep
}

// readFrame reads one rewind frame: the packet (a copy) or, for an end
// frame, nil and its reason.
func readFrame(t *testing.T, br *bufio.Reader) ([]byte, uint8) {
	t.Helper()
	hdr, err := br.Peek(wire.RewindFrameHeaderBytes)
	if err != nil {
		t.Fatalf("frame: %v", err)
	}
	n, err := wire.RewindFrameLen(hdr, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		t.Fatal(err)
	}
	pkt, reason, _, err := wire.DecodeRewindFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	return pkt, reason
}

// startRewindServer serves tip's rewinds with cfg on loopback until the
// test ends; it returns the server and its address.
func startRewindServer(t *testing.T, tip *Tip, cfg RewindConfig) (*RewindServer, string) {
	t.Helper()
	srv, err := NewRewindServer(tip, cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return srv, l.Addr().String()
}

// TestRewindServer_FollowsTheGrowingStore: a rewind from seq N gets every
// stored packet from N, byte for byte, then the packets appended while it
// streams (it follows the tip), until the client closes; a rewind without
// RewindFollow ends at the tip with an end frame; a seq below the oldest
// is answered RewindGone; another session RewindBadSession.
func TestRewindServer_FollowsTheGrowingStore(t *testing.T) {
	st := mixed(3000)
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, testConfig())
	defer s.Close()
	half := len(st.pkts) / 2
	appendAll(t, s, st.pkts[:half])
	if err := s.Tick(1); err != nil {
		t.Fatal(err)
	}
	_, addr := startRewindServer(t, s.Tip(), DefaultRewindConfig())

	from := uint64(700)
	c, br, rep := rewindClient(t, addr, testSession, from, wire.RewindFollow)
	defer c.Close()
	if rep.Status != wire.RewindOK || rep.Session != testSession || rep.Oldest != 1 {
		t.Fatalf("reply %+v", rep)
	}
	go func() { // the store grows while the rewind streams
		for i, p := range st.pkts[half:] {
			if err := s.Append(p); err != nil {
				t.Error(err)
				return
			}
			if i%10 == 0 {
				s.Tick(int64(i + 2))
			}
		}
		s.Tick(1 << 40)
	}()
	want := expected(st.pkts, from, lastSeq(st.pkts))
	for i := range want {
		p, reason := readFrame(t, br)
		if p == nil {
			t.Fatalf("end frame (reason %d) after %d packets", reason, i)
		}
		if !bytes.Equal(p, want[i]) {
			t.Fatalf("packet %d differs", i)
		}
	}
	c.Close()

	c2, br2, rep2 := rewindClient(t, addr, 0, 1, 0)
	defer c2.Close()
	if rep2.Status != wire.RewindOK {
		t.Fatalf("reply %+v", rep2)
	}
	n := 0
	for {
		p, reason := readFrame(t, br2)
		if p == nil {
			if reason != wire.RewindEndTip {
				t.Fatalf("end reason %d, want RewindEndTip", reason)
			}
			break
		}
		n++
	}
	if n == 0 {
		t.Fatal("nothing before the end frame")
	}
	if _, _, rep := rewindClient(t, addr, testSession+1, 1, 0); rep.Status != wire.RewindBadSession {
		t.Fatalf("other session: status %d", rep.Status)
	}
}

// TestRewindServer_BoundsConnections: beyond MaxRewinds streaming, a
// request is answered RewindUnavailable; beyond twice that many open
// connections, a new one is closed at once.
func TestRewindServer_BoundsConnections(t *testing.T) {
	st := mixed(200)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts)
	s.Tick(1)
	cfg := DefaultRewindConfig()
	cfg.MaxRewinds = 2
	// Without the bound the last connection below would be closed only
	// after RequestTimeout: far beyond the generous read deadline there.
	cfg.RequestTimeout = 10 * time.Minute
	srv, addr := startRewindServer(t, s.Tip(), cfg)
	// conns waits until the server's table holds n connections: it drops
	// a connection only after its answer is written, so a client may read
	// the answer before the table has shrunk.
	conns := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			srv.mu.Lock()
			k := len(srv.conns)
			srv.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server holds %d connections, want %d", k, n)
			}
		}
	}
	for i := 0; i < 2; i++ {
		c, _, rep := rewindClient(t, addr, 0, 1, wire.RewindFollow)
		defer c.Close()
		if rep.Status != wire.RewindOK {
			t.Fatalf("rewind %d: status %d", i, rep.Status)
		}
	}
	c, _, rep := rewindClient(t, addr, 0, 1, wire.RewindFollow)
	c.Close()
	if rep.Status != wire.RewindUnavailable {
		t.Fatalf("third rewind: status %d, want RewindUnavailable", rep.Status)
	}
	conns(2)
	// Two idle connections fill the table (2 streaming + 2 idle = 4).
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	conns(4)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Without the bound it would wait for its request (RequestTimeout,
	// 10 min): the deadline is far below that.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var b [1]byte
	if _, err := c.Read(b[:]); err != io.EOF {
		t.Fatalf("connection beyond the bound: read %v, want EOF (closed at once)", err)
	}
}

// TestRewindServer_FollowPastTheTipTimesOut: a follow rewind from far
// beyond what the store holds ends with RewindEndTip after
// PastTipTimeout instead of holding its slot forever (64 such rewinds held
// every slot, issue 16); a follow from the next seq of an idle store goes
// on waiting.
func TestRewindServer_FollowPastTheTipTimesOut(t *testing.T) {
	st := mixed(200)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts)
	s.Tick(1)
	cfg := DefaultRewindConfig()
	cfg.PastTipTimeout = 200 * time.Millisecond
	_, addr := startRewindServer(t, s.Tip(), cfg)
	next := s.Contiguous() + 1

	at, brAt, rep := rewindClient(t, addr, testSession, next, wire.RewindFollow)
	defer at.Close()
	if rep.Status != wire.RewindOK {
		t.Fatalf("follow from the next seq: reply %+v", rep)
	}
	c, br, rep := rewindClient(t, addr, testSession, next+1_000_000, wire.RewindFollow)
	defer c.Close()
	if rep.Status != wire.RewindOK {
		t.Fatalf("reply %+v", rep)
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(3 * time.Second))
	if p, reason := readFrame(t, br); p != nil || reason != wire.RewindEndTip {
		t.Fatalf("got a packet or end reason %d, want RewindEndTip", reason)
	}
	t.Logf("ended after %v", time.Since(start))
	at.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := brAt.Peek(1); err == nil {
		t.Fatal("the follow from the next seq of an idle store got a frame")
	}
}
