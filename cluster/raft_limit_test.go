package cluster

import (
	"errors"

	"net"
	"testing"
	"time"
)

// TestOpenRaft_InboundConnectionsCapped: the Raft port of a real
// OpenRaft closes connections beyond raftMaxInbound at once. Before,
// hashicorp/raft's transport kept every one (3000 idle connections held
// +365 MB for good, issue 16).
func TestOpenRaft_InboundConnectionsCapped(t *testing.T) {
	cfg := DefaultMemberConfig()
	cfg.ID, cfg.Dir, cfg.RaftAddr = 1, t.TempDir(), "127.0.0.1:0"
	rd, err := OpenRaft(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	addr := string(rd.Transport.LocalAddr())
	extra := 16
	var conns []net.Conn
	for i := 0; i < raftMaxInbound+extra; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	closed := 0
	var b [1]byte
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		_, err := c.Read(b[:])
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++
		}
	}
	if closed < extra {
		t.Fatalf("%d connections to the Raft port, cap %d: %d closed by the server, want >= %d", len(conns), raftMaxInbound, closed, extra)
	}
}
