package cluster

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Bounds of the Raft listener (limitLayer). A group has at most MaxVoters
// peers plus nonvoters, each with raft's pool of 10 connections and one
// in flight: 128 covers a five-member group several times over, while
// 3000 idle connections (+365 MB, kept for good) are refused.
const (
	raftMaxInbound  = 128
	raftIdleTimeout = 5 * time.Minute
)

// limitLayer caps the connections a Raft StreamLayer accepts and gives
// each an idle deadline: hashicorp/raft's NetworkTransport keeps every
// inbound connection and reads it with no deadline, so any host could
// hold memory for good by opening connections and sending nothing. A
// connection beyond the cap is closed at once and counted (Refused); one
// that brings no byte for raftIdleTimeout is closed (a pooled connection
// of a live peer is redialled by raft on its next use). It does not stop
// a forged RPC: that needs the TLS stream layer of the later work.
type limitLayer struct {
	raft.StreamLayer
	sem     chan struct{}
	idle    time.Duration
	refused atomic.Uint64
}

func newLimitLayer(l raft.StreamLayer, maxConns int, idle time.Duration) *limitLayer {
	return &limitLayer{StreamLayer: l, sem: make(chan struct{}, maxConns), idle: idle}
}

// Accept returns the next connection within the cap.
func (l *limitLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.StreamLayer.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &idleConn{Conn: c, idle: l.idle, release: l.release}, nil
		default:
			c.Close()
			l.refused.Add(1)
		}
	}
}

func (l *limitLayer) release() { <-l.sem }

// Refused is the number of connections closed because raftMaxInbound were
// open.
func (l *limitLayer) Refused() uint64 { return l.refused.Load() }

// idleConn is an accepted Raft connection whose every read must bring a
// byte within idle.
type idleConn struct {
	net.Conn
	idle    time.Duration
	release func()
	once    sync.Once
}

func (c *idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c *idleConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
