package cluster

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// freshConn is a Raft connection this member dialed. raft's transport
// pools such connections per peer and learns that one is dead only by
// using it: after a peer restarts (or a drill's partition heals), the
// first request on each pooled connection fails, and when that request is
// a vote, the candidate loses the vote and waits out an election timeout
// (seen in the failover drill: "failed to make requestVote RPC ... EOF",
// a failover of 2x the timeout). So at the start of each request (the
// first Write after a Read: raft writes a request, then reads its answer)
// freshConn peeks at the socket without blocking; if the peer has closed
// it (EOF or a reset is waiting), it dials afresh and sends the request on
// the new connection. Both sides are at a request boundary, so the peer's
// transport sees an ordinary new connection.
//
// raft uses a pooled connection from one goroutine at a time; mu guards
// the swap against a Close from another (the transport shutting down).
type freshConn struct {
	mu       sync.Mutex
	net.Conn // the current connection
	dial     func() (net.Conn, error)
	started  bool // a Read happened: the next Write begins a request
	deadline time.Time
	closed   bool
	onClose  func() // the layer forgets it (called once, without mu)
}

func (c *freshConn) conn() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn
}

func (c *freshConn) Read(p []byte) (int, error) {
	n, err := c.conn().Read(p)
	c.started = true
	return n, err
}

func (c *freshConn) Write(p []byte) (int, error) {
	if c.started {
		c.started = false
		if old := c.conn(); peerGone(old) {
			if nc, err := c.dial(); err == nil {
				c.mu.Lock()
				if c.closed {
					c.mu.Unlock()
					nc.Close()
					return 0, net.ErrClosed
				}
				_ = nc.SetDeadline(c.deadline)
				c.Conn = nc
				c.mu.Unlock()
				old.Close()
			}
		}
	}
	return c.conn().Write(p)
}

// SetDeadline is remembered for a connection dialed afresh (raft sets it
// before each request).
func (c *freshConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

func (c *freshConn) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	err := c.Conn.Close()
	c.mu.Unlock()
	if first && c.onClose != nil {
		c.onClose()
	}
	return err
}

// peerGone peeks, without blocking, at whether the peer has closed c: a
// read would return EOF, or a reset is pending. A connection that cannot
// be peeked at (no syscall.Conn) is taken as alive.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
		return true
	})
	return gone
}
