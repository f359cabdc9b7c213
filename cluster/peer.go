package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/wire"
)

// The peer server answers what the members of the group ask each other
// (the peer protocol, wire/peer.go) on a member's peer port
// (fsm.Member.StreamAddr): fetches of stored stream packets (the
// catch-up of an epoch change), seals of the current epoch and the status
// a handover waits on. Fetch, RequestSeal and RequestPeerStatus are its
// clients. Members never use the admin endpoint, which is for people.
// A fetch is streamed by replayer.SendRange, the loop that streams
// rewinds too; what differs is the source (a standby's store read under
// its lock, FetchRange) and the framing (peer frames).

// fetchChunkBytes is how much the server copies out of the store per
// turn of its lock, so the standby's stream loop waits little.
const fetchChunkBytes = 1 << 20

// The store's largest frame fits a peer packet frame.
const _ = uint(wire.PeerMaxPacketBytes - replayer.MaxFramePacketBytes)

// FetchSource is what a PeerServer serves: a member's store, read under
// whatever lock guards it. Standby implements it.
type FetchSource interface {
	// FetchRange appends to dst, as peer frames (wire.PeerPacket), the
	// stored packets that carry records of from..to, in order, stopping
	// after about maxBytes at a packet whose last record is whole. It
	// returns dst, the next seq to ask for and whether from..to is done
	// (served, or nothing more held); held is the highest seq held whole.
	FetchRange(dst []byte, from, to uint64, maxBytes int) (out []byte, next uint64, done bool, held uint64, err error)
}

// PeerMember is what a PeerServer asks of the member it serves
// (cluster.Member): seals and status. Safe from any goroutine.
type PeerMember interface {
	// Seal stops acking epoch (and every earlier one) and says what this
	// member holds.
	Seal(epoch uint32) (wire.PeerSealReply, error)
	// PeerStatus is this member's role, epoch and the start of its
	// current or last epoch as primary.
	PeerStatus() wire.PeerStatusReply
}

// PeerServerConfig tunes a PeerServer.
type PeerServerConfig struct {
	// MaxConns bounds the requests served at once; a connection takes a
	// slot only once its request arrived, so connections that send
	// nothing never hold one. At most 4*MaxConns connections may wait for
	// their request; beyond, the oldest waiting one is closed (counted in
	// Evicted). Idle connections made a new primary's catch-up time out.
	MaxConns int
	// IOTimeout bounds each write of an answer.
	IOTimeout time.Duration
	// RequestTimeout bounds reading a request after the connection
	// opened (a request is one small frame). 0: IOTimeout.
	RequestTimeout time.Duration
	// Logger gets one line per failed connection (nil: slog.Default()).
	Logger *slog.Logger
	// TLS, when set, serves over mutual TLS with this configuration
	// (tlsconf.Identity.Server(membersOnly) for a member: fetch, seal and
	// status only to and from members); a refused handshake is logged
	// and counted (Refused).
	TLS *tls.Config
}

// DefaultPeerServerConfig: 8 connections, 5 s per I/O.
func DefaultPeerServerConfig() PeerServerConfig {
	return PeerServerConfig{MaxConns: 8, IOTimeout: 5 * time.Second, RequestTimeout: time.Second}
}

// PeerServer answers the peer protocol on a listener: fetches from a
// FetchSource, seals and status from a PeerMember (SetMember).
type PeerServer struct {
	cfg    PeerServerConfig
	src    FetchSource
	member atomic.Pointer[peerMemberRef]
	ln     net.Listener
	sem    chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	conn   map[net.Conn]*openConn // open connections, closed by Close
	done   bool
	// evicted counts connections closed before their request came
	// because 4*MaxConns were waiting.
	evicted atomic.Uint64
	// refused counts connections whose TLS handshake failed.
	refused atomic.Uint64
}

// Refused is the number of connections whose TLS handshake failed (a
// peer without a member's certificate).
func (s *PeerServer) Refused() uint64 { return s.refused.Load() }

// openConn is one open connection: whether it still waits for its
// request, and since when.
type openConn struct {
	opened  time.Time
	waiting bool
}

// Evicted is the number of connections closed while they waited for their
// request, to make room for new ones.
func (s *PeerServer) Evicted() uint64 { return s.evicted.Load() }

// NewPeerServer serves src on ln (Serve starts it; Close stops it and
// closes ln). src may be nil: fetches are refused. Seals and status
// requests are refused until SetMember.
func NewPeerServer(cfg PeerServerConfig, src FetchSource, ln net.Listener) (*PeerServer, error) {
	if cfg.MaxConns < 1 || cfg.MaxConns > 1024 {
		return nil, fmt.Errorf("%w: PeerServerConfig.MaxConns = %d, want 1..1024", ErrConfig, cfg.MaxConns)
	}
	if cfg.IOTimeout < time.Millisecond {
		return nil, fmt.Errorf("%w: PeerServerConfig.IOTimeout = %v, want >= 1ms", ErrConfig, cfg.IOTimeout)
	}
	if cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: PeerServerConfig.RequestTimeout = %v, want >= 0 (0: IOTimeout)", ErrConfig, cfg.RequestTimeout)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = cfg.IOTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &PeerServer{cfg: cfg, src: src, ln: ln, sem: make(chan struct{}, cfg.MaxConns), conn: map[net.Conn]*openConn{}}, nil
}

type peerMemberRef struct{ m PeerMember }

// SetMember makes the server answer seals and status requests for m
// (before Serve, so that no request finds none: the listener's backlog
// holds them meanwhile).
func (s *PeerServer) SetMember(m PeerMember) { s.member.Store(&peerMemberRef{m}) }

// Addr is the listener's address.
func (s *PeerServer) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until Close; it returns nil after Close, or
// the listener's error.
func (s *PeerServer) Serve() error {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.done
			s.mu.Unlock()
			if done {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("cluster: fetch server: %w", err)
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.evictWaiting()
		s.conn[c] = &openConn{opened: time.Now(), waiting: true}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// Close stops Serve, closes every connection and waits for their
// goroutines.
func (s *PeerServer) Close() error {
	s.mu.Lock()
	s.done = true
	err := s.ln.Close()
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// evictWaiting closes the oldest connection still waiting for its request
// when 4*MaxConns wait (s.mu held).
func (s *PeerServer) evictWaiting() {
	var oldest net.Conn
	var at time.Time
	n := 0
	for c, pc := range s.conn {
		if !pc.waiting {
			continue
		}
		n++
		if oldest == nil || pc.opened.Before(at) {
			oldest, at = c, pc.opened
		}
	}
	if n >= 4*s.cfg.MaxConns {
		oldest.Close() // its goroutine ends and forgets it
		s.conn[oldest].waiting = false
		s.evicted.Add(1)
	}
}

func (s *PeerServer) serve(raw net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conn, raw)
		s.mu.Unlock()
		raw.Close()
		s.wg.Done()
	}()
	c := raw
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.RequestTimeout))
	if s.cfg.TLS != nil {
		// The handshake counts in the request's time: a connection that
		// does not finish it holds no slot either.
		tc := tls.Server(raw, s.cfg.TLS)
		if err := tc.Handshake(); err != nil {
			s.refused.Add(1)
			s.cfg.Logger.Warn("cluster: peer request refused", "peer", raw.RemoteAddr().String(), "err", fmt.Errorf("tls handshake: %w", err))
			return
		}
		c = tc
	}
	var req [wire.PeerRequestBytes]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		s.cfg.Logger.Warn("cluster: peer request", "peer", c.RemoteAddr().String(), "err", fmt.Errorf("read request: %w", err))
		return
	}
	s.mu.Lock()
	if pc := s.conn[raw]; pc != nil {
		pc.waiting = false
	}
	s.mu.Unlock()
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	if err := s.answer(c, req[:]); err != nil {
		s.cfg.Logger.Warn("cluster: peer request", "peer", c.RemoteAddr().String(), "err", err)
	}
}

// errNoMember: a seal or status request reached a peer server that
// serves no member (yet), or a fetch one that serves no store.
var (
	errNoMember = errors.New("cluster: this peer port serves no member")
	errNoStore  = errors.New("cluster: this peer port serves no store")
)

// answer answers one request (read by serve). A refused seal is the
// asker's to report; only a broken request or a failed write is this
// server's.
func (s *PeerServer) answer(c net.Conn, req []byte) error {
	var q wire.PeerRequest
	if err := wire.DecodePeerRequest(req, &q); err != nil {
		s.writeError(c, err)
		return err
	}
	if q.Kind == wire.PeerFetch {
		return s.fetch(c, q.From, q.To)
	}
	ref := s.member.Load()
	if ref == nil {
		s.writeError(c, errNoMember)
		return nil
	}
	var out [wire.PeerFrameHeaderBytes + wire.PeerStatusReplyBytes]byte
	b := out[:0]
	switch q.Kind {
	case wire.PeerSeal:
		r, err := ref.m.Seal(q.Epoch)
		if err != nil {
			s.writeError(c, err)
			return nil
		}
		b = wire.AppendPeerSealReplyVersion(b, &r, q.Version) // a version 1 asker reads no stamp
	case wire.PeerStatus:
		r := ref.m.PeerStatus()
		b = wire.AppendPeerStatusReplyVersion(b, &r, q.Version)
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.cfg.IOTimeout))
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// fetch writes the packets holding from..to and the end frame, through
// the loop that serves rewinds too (replayer.SendRange).
func (s *PeerServer) fetch(c net.Conn, from, to uint64) error {
	if s.src == nil {
		s.writeError(c, errNoStore)
		return nil
	}
	src := &fetchSource{src: s.src, next: from, to: to,
		buf: make([]byte, 0, fetchChunkBytes+wire.PeerMaxPacketBytes+wire.PeerFrameHeaderBytes+wire.PeerEndBytes)}
	return replayer.SendRange(c, src, replayer.RangeSendConfig{WriteTimeout: s.cfg.IOTimeout})
}

// fetchSource is a fetch's answer as replayer.SendRange reads it: chunks
// of about fetchChunkBytes of peer packet frames, each copied out of the
// store in one turn of its lock (FetchRange), the last followed by the
// end frame, or an error frame when the store fails.
type fetchSource struct {
	src      FetchSource
	next, to uint64
	buf      []byte
}

func (f *fetchSource) Next() ([]byte, bool, error) {
	out, n, done, held, err := f.src.FetchRange(f.buf[:0], f.next, f.to, fetchChunkBytes)
	if err != nil {
		return wire.AppendPeerError(f.buf[:0], err.Error()), true, fmt.Errorf("range %d..%d: %w", f.next, f.to, err)
	}
	f.buf = out[:0]
	if done {
		out = wire.AppendPeerEnd(out, held)
	}
	f.next = n
	return out, done, nil
}

func (s *PeerServer) writeError(c net.Conn, err error) {
	_ = c.SetWriteDeadline(time.Now().Add(s.cfg.IOTimeout))
	_, _ = c.Write(wire.AppendPeerError(nil, err.Error()))
}

// peerConn dials addr for one request, bounded by ctx (default 10 s when
// it has no deadline), and sends q. The caller closes the connection
// and calls stop.
func (p PeerClient) peerConn(ctx context.Context, addr string, q *wire.PeerRequest) (c net.Conn, stop func(), err error) {
	cancel := func() {}
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	}
	if p.TLS != nil {
		d := tls.Dialer{Config: p.TLS}
		if c, err = d.DialContext(ctx, "tcp", addr); err != nil {
			err = tlsconf.Explain(addr, err)
		}
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	after := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	stop = func() { after(); cancel() }
	var req [wire.PeerRequestBytes]byte
	if _, err := c.Write(wire.AppendPeerRequest(req[:0], q)); err != nil {
		c.Close()
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// readPeerFrame reads one answer frame into body (grown as needed).
func readPeerFrame(r io.Reader, body []byte) (kind uint8, out []byte, err error) {
	var hdr [wire.PeerFrameHeaderBytes]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if tlsconf.IsRemoteAlert(err) {
			// TLS 1.3: the server's refusal of this member's certificate
			// arrives at the first read.
			return 0, body, tlsconf.Explain("the peer port", err)
		}
		return 0, body, fmt.Errorf("%w (answer cut short)", err)
	}
	kind, n, err := wire.DecodePeerFrameHeader(hdr[:])
	if err != nil {
		return 0, body, err
	}
	if cap(body) < n {
		body = make([]byte, n)
	}
	body = body[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, body, fmt.Errorf("%w (answer cut short)", err)
	}
	return kind, body, nil
}

// RequestSeal asks the member whose peer port is addr to seal epoch and
// returns its answer; a member that refuses answers ErrSealRefused with
// its reason. ctx bounds the exchange.
func RequestSeal(ctx context.Context, addr string, epoch uint32) (wire.PeerSealReply, error) {
	return PeerClient{}.RequestSeal(ctx, addr, epoch)
}

// PeerClient asks members on their peer ports: over plain TCP, or over
// mutual TLS with TLS (tlsconf.Identity.Client(membersOnly): only a
// member's peer port is believed).
type PeerClient struct {
	TLS *tls.Config
}

// RequestSeal is the package's RequestSeal through p.
func (p PeerClient) RequestSeal(ctx context.Context, addr string, epoch uint32) (wire.PeerSealReply, error) {
	var r wire.PeerSealReply
	body, err := p.peerCall(ctx, addr, &wire.PeerRequest{Kind: wire.PeerSeal, Epoch: epoch}, wire.PeerSealed)
	if errors.Is(err, ErrSealRefused) && strings.Contains(err.Error(), wire.ErrVersion.Error()) {
		// A member of an older release serves version 1 only: asked
		// again so, it answers without its last stamp.
		body, err = p.peerCall(ctx, addr, &wire.PeerRequest{Version: wire.PeerMinVersion, Kind: wire.PeerSeal, Epoch: epoch}, wire.PeerSealed)
	}
	if err == nil {
		err = wire.DecodePeerSealReply(body, &r)
	}
	if err != nil {
		return r, fmt.Errorf("cluster: seal epoch %d at %s: %w", epoch, addr, err)
	}
	return r, nil
}

// RequestPeerStatus asks the member whose peer port is addr for its role,
// epoch and the start of its epoch as primary. ctx bounds the exchange.
func RequestPeerStatus(ctx context.Context, addr string) (wire.PeerStatusReply, error) {
	return PeerClient{}.RequestPeerStatus(ctx, addr)
}

// RequestPeerStatus is the package's RequestPeerStatus through p.
func (p PeerClient) RequestPeerStatus(ctx context.Context, addr string) (wire.PeerStatusReply, error) {
	var r wire.PeerStatusReply
	body, err := p.peerCall(ctx, addr, &wire.PeerRequest{Kind: wire.PeerStatus}, wire.PeerState)
	if errors.Is(err, ErrSealRefused) && strings.Contains(err.Error(), wire.ErrVersion.Error()) {
		// An older member: its answer has no Contiguous (0).
		body, err = p.peerCall(ctx, addr, &wire.PeerRequest{Version: wire.PeerMinVersion, Kind: wire.PeerStatus}, wire.PeerState)
	}
	if err == nil {
		err = wire.DecodePeerStatusReply(body, &r)
	}
	if err != nil {
		return r, fmt.Errorf("cluster: status of %s: %w", addr, err)
	}
	return r, nil
}

// peerCall sends q to addr and returns the body of the one answer frame
// of kind want; an error frame is ErrSealRefused with its text.
func (p PeerClient) peerCall(ctx context.Context, addr string, q *wire.PeerRequest, want uint8) ([]byte, error) {
	c, stop, err := p.peerConn(ctx, addr, q)
	if err != nil {
		return nil, err
	}
	defer stop()
	defer c.Close()
	kind, body, err := readPeerFrame(c, make([]byte, 0, wire.PeerStatusReplyBytes))
	switch {
	case err != nil:
		return nil, err
	case kind == wire.PeerError:
		return nil, fmt.Errorf("%w: %s", ErrSealRefused, body)
	case kind != want:
		return nil, fmt.Errorf("%w: answer of kind %d, want %d", wire.ErrKind, kind, want)
	}
	return body, nil
}

// Fetch asks the member at addr for the packets holding from..to and hands
// each to fn, in stream order (pkt is valid only during the call; an
// error from fn ends the fetch with it). It returns the highest seq the
// server holds whole. The answer may stop short of to when the server
// holds less: the caller checks what it got. ctx bounds the whole
// exchange (default 10 s when it has no deadline).
func Fetch(ctx context.Context, addr string, from, to uint64, fn func(pkt []byte) error) (held uint64, err error) {
	return PeerClient{}.Fetch(ctx, addr, from, to, fn)
}

// Fetch is the package's Fetch through p.
func (p PeerClient) Fetch(ctx context.Context, addr string, from, to uint64, fn func(pkt []byte) error) (held uint64, err error) {
	if from == 0 || to < from {
		return 0, ErrFetchRange
	}
	c, stop, err := p.peerConn(ctx, addr, &wire.PeerRequest{Kind: wire.PeerFetch, From: from, To: to})
	if err != nil {
		return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w", from, to, addr, err)
	}
	defer stop()
	defer c.Close()
	r := bufio.NewReaderSize(c, 256<<10)
	body := make([]byte, 0, 64<<10)
	for {
		var kind uint8
		kind, body, err = readPeerFrame(r, body)
		if err != nil {
			return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w", from, to, addr, err)
		}
		switch kind {
		case wire.PeerPacket:
			if err := fn(body); err != nil {
				return 0, err
			}
		case wire.PeerEnd:
			return wire.DecodePeerEnd(body)
		case wire.PeerError:
			return 0, fmt.Errorf("%w: %s: %s", ErrFetchRefused, addr, body)
		default:
			return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w: a frame of kind %d", from, to, addr, wire.ErrKind, kind)
		}
	}
}
