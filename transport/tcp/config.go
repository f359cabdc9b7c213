package tcp

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// Config shapes a Server or a Client. The zero value is not valid: start
// from DefaultConfig.
type Config struct {
	// Addr is where the Server listens (port 0 picks a free port, see
	// Server.Addr) and where the Client connects.
	Addr string
	// Addrs, when set, are the servers a Client connects to, in turn,
	// instead of Addr: the stream addresses of a sequencer cluster's
	// members, of which only the primary accepts (a standby refuses, a
	// deposed primary closes). A Client whose connection ends, or which
	// is refused, tries the next one, so it follows the primary from
	// member to member with no configuration change. Client only.
	Addrs []string
	// MaxFrameBytes is the largest frame accepted in either direction. A
	// peer announcing a longer frame is disconnected (counted in
	// Drops.OversizedFrames); Publish, SendTo and Send refuse longer frames
	// with transport.ErrFrameTooLarge. It must carry any wire frame
	// (MinMaxFrameBytes).
	MaxFrameBytes int
	// ReadBufferBytes is each connection's read buffer: one read syscall
	// fills it and yields as many frames as it holds. It grows once, up to
	// MaxFrameBytes+4, if a frame does not fit.
	ReadBufferBytes int
	// WriteBufferBytes is the initial capacity of each connection's send
	// queue buffers (three per connection, rotating between the endpoint
	// and the writer goroutine); they grow to the largest burst and stay.
	WriteBufferBytes int
	// InboxBytes is the receive ring of connections Poll cannot read
	// itself (no file descriptor: a test's wrapper), made on the first
	// one; their reader goroutines stop reading while it is full (TCP
	// flow control pushes back on the sender) until Poll makes room.
	// Sockets are read by Poll, with no ring (see the package comment).
	InboxBytes int
	// SlowClientBytes and SlowClientTimeout find a peer that does not
	// read: a connection holding more than SlowClientBytes not yet written
	// to its socket, whose writes have made no progress for
	// SlowClientTimeout, is closed with ErrSlowClient (logged, counted in
	// Drops.SlowClients). A node that is cut off reconnects and repairs
	// its gap by NAK. A healthy peer may hold more for a moment (one large
	// message is a burst of many frames): it is not cut while it reads.
	SlowClientBytes   int
	SlowClientTimeout time.Duration
	// MaxQueueBytes bounds the bytes one connection may hold not yet
	// written, reading or not: beyond it the connection is closed at once
	// (ErrSlowClient). It bounds what a peer can make the endpoint hold:
	// about twice this (the send buffers rotate), plus the kernel's socket
	// buffers. Keep it above the largest burst (the largest message).
	MaxQueueBytes int
	// MaxConns bounds the connections a Server holds at once; one more is
	// closed as soon as it is accepted (counted in Drops.RefusedConns,
	// logged), so that clients cannot grow the server's memory without
	// bound. Server only.
	MaxConns int
	// DialTimeout bounds each connection attempt of a Client.
	DialTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the Client's backoff between
	// connection attempts; it doubles from Min up to Max, with jitter.
	ReconnectMin, ReconnectMax time.Duration
	// Faults are applied to received frames at the edge, in Poll (a lost
	// frame is simply not delivered). The Server uses fault stream 0 and a
	// Client stream 1: give endpoints different seeds to decorrelate them.
	Faults fault.Config
	// TLS, when set, wraps every connection in mutual TLS 1.3 with this
	// identity (tlsconf.Identity.Server for a Server, .Client for a
	// Client), peers checked by certificate and by TLSPeers. A Server
	// handshakes each connection before it takes a slot (within
	// DialTimeout, at most maxHandshakes at once); a refused peer is
	// logged with why and counted in Drops.RefusedConns. A TLS
	// connection is read by a goroutine rather than by Poll (no file
	// descriptor to poll; see the package comment). nil: plain TCP.
	TLS *tlsconf.Identity
	// TLSPeers restricts the peers' certificate names (nil: any the CA
	// signed).
	TLSPeers tlsconf.Allow
	// Auth, when set, signs every frame the endpoint sends and verifies
	// every one it receives (issue 16, wire.Auth, the trailer of the UDP
	// datagrams): a frame that fails (unsigned, unknown key, a key that
	// may not sign its kind, a bad tag) is counted in Counters().AuthFailed
	// and by kind in AuthFailures, never handed to the Handler, and its
	// connection is closed (the reason logged): a byte stream cannot be
	// trusted past a forged frame. A signed frame is wire.AuthTrailerBytes
	// longer than the frame given to Publish, SendTo or Send; MaxFrameBytes
	// bounds the signed frame.
	Auth *wire.Auth
	// Logger receives the warnings about connections closed for cause
	// (with the reason) and refused, at most one line per
	// transport.DefaultLogInterval with the count. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Limits and defaults of Config.
const (
	DefaultAddr = "127.0.0.1:9200"
	// MinMaxFrameBytes is the largest wire frame (a maximal UDP datagram).
	MinMaxFrameBytes         = 65507
	DefaultMaxFrameBytes     = 1 << 20
	DefaultReadBufferBytes   = 256 << 10
	DefaultWriteBufferBytes  = 64 << 10
	DefaultInboxBytes        = 4 << 20
	DefaultSlowClientBytes   = 4 << 20
	DefaultSlowClientTimeout = 3 * time.Second
	DefaultMaxQueueBytes     = 64 << 20 // a node's default window (32 MiB of commands, resent at once) twice over
	DefaultMaxConns          = 1024
	DefaultDialTimeout       = 2 * time.Second
	DefaultReconnectMin      = 20 * time.Millisecond
	DefaultReconnectMax      = 2 * time.Second

	maxMaxFrameBytes = 1 << 30
	// maxHandshakes bounds a Server's TLS handshakes in progress.
	maxHandshakes      = 64
	maxAddrs           = 64
	minBufferBytes     = 4 << 10
	maxBufferBytes     = 1 << 30
	maxInboxBytes      = 1 << 34
	maxSlowClientBytes = 1 << 40
	// maxMaxConns keeps a connection's slot and a generation within a
	// Peer's transport.PeerBits.
	maxMaxConns = 1 << 16
)

// DefaultConfig listens on or connects to DefaultAddr with the defaults above
// and no faults.
func DefaultConfig() Config {
	return Config{
		Addr:              DefaultAddr,
		MaxFrameBytes:     DefaultMaxFrameBytes,
		ReadBufferBytes:   DefaultReadBufferBytes,
		WriteBufferBytes:  DefaultWriteBufferBytes,
		InboxBytes:        DefaultInboxBytes,
		SlowClientBytes:   DefaultSlowClientBytes,
		SlowClientTimeout: DefaultSlowClientTimeout,
		MaxQueueBytes:     DefaultMaxQueueBytes,
		MaxConns:          DefaultMaxConns,
		DialTimeout:       DefaultDialTimeout,
		ReconnectMin:      DefaultReconnectMin,
		ReconnectMax:      DefaultReconnectMax,
	}
}

// serverAddrs are the addresses a Client tries, in turn.
func (c Config) serverAddrs() []string {
	if len(c.Addrs) > 0 {
		return c.Addrs
	}
	return []string{c.Addr}
}

// minInboxBytes is the smallest inbox that holds one maximal frame.
func (c Config) minInboxBytes() int { return recordBytes(c.MaxFrameBytes) }

// Validate reports the first field out of its allowed range.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return config.New(ErrConfig, "Addr", c.Addr, fmt.Sprintf("host:port: %v", err))
	}
	for i, a := range c.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return config.New(ErrConfig, fmt.Sprintf("Addrs[%d]", i), a, fmt.Sprintf("host:port: %v", err))
		}
	}
	if len(c.Addrs) > maxAddrs {
		return config.New(ErrConfig, "Addrs", len(c.Addrs), fmt.Sprintf("at most %d addresses", maxAddrs))
	}
	if c.MaxFrameBytes < MinMaxFrameBytes || c.MaxFrameBytes > maxMaxFrameBytes {
		return config.New(ErrConfig, "MaxFrameBytes", c.MaxFrameBytes, fmt.Sprintf("%d..%d", MinMaxFrameBytes, maxMaxFrameBytes))
	}
	if c.ReadBufferBytes < minBufferBytes || c.ReadBufferBytes > maxBufferBytes {
		return config.New(ErrConfig, "ReadBufferBytes", c.ReadBufferBytes, fmt.Sprintf("%d..%d", minBufferBytes, maxBufferBytes))
	}
	if c.WriteBufferBytes < minBufferBytes || c.WriteBufferBytes > maxBufferBytes {
		return config.New(ErrConfig, "WriteBufferBytes", c.WriteBufferBytes, fmt.Sprintf("%d..%d", minBufferBytes, maxBufferBytes))
	}
	if c.InboxBytes < c.minInboxBytes() || c.InboxBytes > maxInboxBytes {
		return config.New(ErrConfig, "InboxBytes", c.InboxBytes, fmt.Sprintf("%d (one MaxFrameBytes frame)..%d", c.minInboxBytes(), maxInboxBytes))
	}
	if c.SlowClientBytes < c.MaxFrameBytes+lenPrefixBytes || c.SlowClientBytes > maxSlowClientBytes {
		return config.New(ErrConfig, "SlowClientBytes", c.SlowClientBytes, fmt.Sprintf("%d (MaxFrameBytes+4)..%d", c.MaxFrameBytes+lenPrefixBytes, maxSlowClientBytes))
	}
	if c.SlowClientTimeout <= 0 {
		return config.New(ErrConfig, "SlowClientTimeout", c.SlowClientTimeout, "> 0")
	}
	if c.MaxQueueBytes < c.SlowClientBytes || c.MaxQueueBytes > maxSlowClientBytes {
		return config.New(ErrConfig, "MaxQueueBytes", c.MaxQueueBytes, fmt.Sprintf("%d (SlowClientBytes)..%d", c.SlowClientBytes, maxSlowClientBytes))
	}
	if c.MaxConns < 1 || c.MaxConns > maxMaxConns {
		return config.New(ErrConfig, "MaxConns", c.MaxConns, fmt.Sprintf("1..%d", maxMaxConns))
	}
	if c.DialTimeout <= 0 {
		return config.New(ErrConfig, "DialTimeout", c.DialTimeout, "> 0")
	}
	if c.ReconnectMin <= 0 {
		return config.New(ErrConfig, "ReconnectMin", c.ReconnectMin, "> 0")
	}
	if c.ReconnectMax < c.ReconnectMin {
		return config.New(ErrConfig, "ReconnectMax", c.ReconnectMax, fmt.Sprintf(">= ReconnectMin (%v)", c.ReconnectMin))
	}
	if err := c.Faults.Validate(); err != nil {
		return &config.Error{Field: "Faults", Value: c.Faults.String(), Allowed: err.Error(), Err: ErrConfig}
	}
	return nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// MaxFrameBytes is the largest frame the server sends and accepts.
func (s *Server) MaxFrameBytes() int { return s.cfg.MaxFrameBytes }

// MaxFrameBytes is the largest frame the client sends and accepts.
func (c *Client) MaxFrameBytes() int { return c.cfg.MaxFrameBytes }

// maxUnsigned is the largest frame Publish, SendTo and Send take: the
// signed frame must fit MaxFrameBytes.
func (c Config) maxUnsigned() int {
	if c.Auth != nil {
		return c.MaxFrameBytes - wire.AuthTrailerBytes
	}
	return c.MaxFrameBytes
}
