package cluster

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// PartitionLayer is a raft.StreamLayer over TCP with a switch that cuts
// the member off from its peers, for failover drills (`seqd drill
// failover`, `seqd sequencer --fault-addr`): while partitioned, every Raft
// connection it holds is closed, dials fail with ErrPartitioned and
// accepted connections are closed at once. Switched off, it is a plain
// TCP stream layer again and Raft reconnects by itself. It is wired in
// only when MemberConfig.RaftStream is set; a member started without the fault
// flag never has one.
//
// Safe for concurrent use; mu guards conns only.
type PartitionLayer struct {
	ln  net.Listener
	on  atomic.Bool
	mu  sync.Mutex
	con map[*partitionConn]struct{} // open connections, closed when partitioned
}

// NewPartitionLayer listens on addr (host:port).
func NewPartitionLayer(addr string) (*PartitionLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &PartitionLayer{ln: ln, con: map[*partitionConn]struct{}{}}, nil
}

// SetPartitioned switches the partition on (closing every open Raft
// connection) or off.
func (l *PartitionLayer) SetPartitioned(on bool) {
	l.on.Store(on)
	if !on {
		return
	}
	l.mu.Lock()
	open := make([]*partitionConn, 0, len(l.con))
	for c := range l.con {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// Partitioned reports whether the partition is on.
func (l *PartitionLayer) Partitioned() bool { return l.on.Load() }

// Accept waits for the next peer connection; while partitioned it closes
// each one at once.
func (l *PartitionLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		if l.on.Load() {
			c.Close()
			continue
		}
		return l.track(c), nil
	}
}

// Dial connects to a peer, unless partitioned.
func (l *PartitionLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if l.on.Load() {
		return nil, ErrPartitioned
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c), nil
}

// Close stops listening.
func (l *PartitionLayer) Close() error { return l.ln.Close() }

// Addr is the listening address.
func (l *PartitionLayer) Addr() net.Addr { return l.ln.Addr() }

func (l *PartitionLayer) track(c net.Conn) net.Conn {
	pc := &partitionConn{Conn: c, l: l}
	l.mu.Lock()
	l.con[pc] = struct{}{}
	l.mu.Unlock()
	if l.on.Load() {
		// Switched on between the check and the table: close it here.
		pc.Close()
	}
	return pc
}

// partitionConn leaves its layer's table when closed.
type partitionConn struct {
	net.Conn
	l    *PartitionLayer
	once sync.Once
}

func (c *partitionConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.con, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// SyscallConn exposes the TCP socket, for freshConn's peek.
func (c *partitionConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
