package cluster

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/internal/tlsconf"
)

// MemberName is the certificate identity of member id ("member-2"): the
// name the Raft and peer ports accept (tlsconf.NameOf).
func MemberName(id uint64) string { return "member-" + strconv.FormatUint(id, 10) }

// memberOfName is MemberName's inverse (0 when name is not a member's).
func memberOfName(name string) uint64 {
	s, ok := strings.CutPrefix(name, "member-")
	if !ok {
		return 0
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// membersOnly accepts the certificates of members (member-N).
func membersOnly(name string) error {
	if memberOfName(name) == 0 {
		return fmt.Errorf("%w: %q is not a member (member-N)", tlsconf.ErrIdentity, name)
	}
	return nil
}

// peerClientOf is the peer client of a member with certificate id (nil:
// plain TCP): it believes only members' peer ports.
func peerClientOf(id *tlsconf.Identity) PeerClient {
	if id == nil {
		return PeerClient{}
	}
	return PeerClient{TLS: id.Client(membersOnly)}
}

// ErrRaftIdentity is why an inbound Raft connection was closed: an RPC
// whose header claims another member than the certificate names (or no
// id at all).
var ErrRaftIdentity = errors.New("cluster: raft RPC claims another member than its certificate")

// tlsLayer carries Raft over mutual TLS (MemberConfig.TLS): both ends
// must hold a member's certificate of the deployment's CA, and every RPC
// a peer sends must claim, in its header (RPCHeader.ID), the member its
// certificate names. hashicorp/raft's NetworkTransport believes the
// header: without this check any certificate holder (or, without TLS,
// any host) could send an AppendEntries or a TimeoutNow as member 9.
// The accepted connection decodes each request once ahead of raft
// (rpcCheckConn) and hands raft the very bytes it read.
type tlsLayer struct {
	raft.StreamLayer
	srv, cli *tls.Config
	log      *slog.Logger
	refused  atomic.Uint64
}

func newTLSLayer(l raft.StreamLayer, id *tlsconf.Identity, log *slog.Logger) *tlsLayer {
	srv := id.Server(membersOnly)
	srv.SessionTicketsDisabled = true // nothing but close_notify waits at a request boundary (peerGone)
	return &tlsLayer{StreamLayer: l, srv: srv, cli: id.Client(membersOnly), log: log}
}

// Refused is the number of inbound connections closed for a refused
// handshake or an RPC of another identity.
func (l *tlsLayer) Refused() uint64 { return l.refused.Load() }

// Accept returns the next connection; its handshake runs at its first
// read (on raft's goroutine for it, not the accept loop's), bounded by
// the read deadline raft's caller sets (limitLayer's idle deadline).
func (l *tlsLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(c, l.srv)
	return &rpcCheckConn{Conn: tc, tc: tc, l: l, br: bufio.NewReaderSize(tc, 64<<10)}, nil
}

// Dial connects to a member and handshakes within timeout.
func (l *tlsLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, l.cli)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, tlsconf.Explain(string(addr), err)
	}
	_ = tc.SetDeadline(time.Time{})
	return &tlsDialConn{Conn: tc, raw: c}, nil
}

// tlsDialConn is a dialled TLS connection that lets freshConn peek at its
// socket (peerGone): the peer's close_notify or end of stream is what
// waits there when the peer went away.
type tlsDialConn struct {
	net.Conn
	raw net.Conn
}

func (c *tlsDialConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.raw.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// rpcCheckConn is an accepted Raft TLS connection. Each Read that finds
// nothing pending decodes the next request (its type byte and its
// msgpack body, as raft's handleCommand does) from the TLS stream while
// recording the bytes, checks its header against the certificate, and
// then serves the recorded bytes; an InstallSnapshot's data follows as
// is. Used by raft's one goroutine for the connection.
type rpcCheckConn struct {
	net.Conn
	tc     *tls.Conn
	l      *tlsLayer
	br     *bufio.Reader
	dec    *codec.Decoder
	rec    bytes.Buffer
	raw    int64  // snapshot bytes to pass through
	member uint64 // the certificate's member id, 0 before the handshake
	err    error  // sticky
}

func (c *rpcCheckConn) Read(p []byte) (int, error) {
	if c.rec.Len() > 0 {
		return c.rec.Read(p)
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.raw > 0 {
		n, err := c.br.Read(p[:min(int64(len(p)), c.raw)])
		c.raw -= int64(n)
		return n, err
	}
	if c.member == 0 {
		if err := c.tc.Handshake(); err != nil {
			return 0, c.fail(fmt.Errorf("raft handshake with %s: %w", c.RemoteAddr(), err))
		}
		c.member = memberOfName(tlsconf.PeerName(c.tc))
		c.dec = codec.NewDecoder(io.TeeReader(c.br, &c.rec), &codec.MsgpackHandle{})
	}
	typ, err := c.br.ReadByte()
	if err != nil {
		return 0, err // the peer hung up between requests: raft ends the connection
	}
	c.rec.Reset()
	c.rec.WriteByte(typ)
	if err := c.check(typ); err != nil {
		return 0, c.fail(err)
	}
	return c.rec.Read(p)
}

// rpc types of hashicorp/raft's NetworkTransport (net_transport.go).
const (
	rpcAppendEntries uint8 = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

func (c *rpcCheckConn) check(typ uint8) error {
	var h raft.RPCHeader
	var err error
	switch typ {
	case rpcAppendEntries:
		var q raft.AppendEntriesRequest
		err, h = c.dec.Decode(&q), q.RPCHeader
	case rpcRequestVote:
		var q raft.RequestVoteRequest
		err, h = c.dec.Decode(&q), q.RPCHeader
	case rpcRequestPreVote:
		var q raft.RequestPreVoteRequest
		err, h = c.dec.Decode(&q), q.RPCHeader
	case rpcTimeoutNow:
		var q raft.TimeoutNowRequest
		err, h = c.dec.Decode(&q), q.RPCHeader
	case rpcInstallSnapshot:
		var q raft.InstallSnapshotRequest
		err, h = c.dec.Decode(&q), q.RPCHeader
		c.raw = max(q.Size, 0)
	default:
		return fmt.Errorf("raft: unknown rpc type %d from %s", typ, c.RemoteAddr())
	}
	if err != nil {
		return fmt.Errorf("raft: decode rpc of type %d from %s: %w", typ, c.RemoteAddr(), err)
	}
	if got := parseServerID(raft.ServerID(h.ID)); got == 0 || got != c.member {
		return fmt.Errorf("%w: %s (certificate %s) sent an RPC of type %d as member %q", ErrRaftIdentity, c.RemoteAddr(), MemberName(c.member), typ, h.ID)
	}
	return nil
}

// fail ends the connection for good and logs why (once per connection).
func (c *rpcCheckConn) fail(err error) error {
	c.err = err
	c.rec.Reset()
	c.l.refused.Add(1)
	c.l.log.Warn("cluster: raft connection refused", "peer", c.RemoteAddr().String(), "err", err)
	return err
}
