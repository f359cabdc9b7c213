package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/seqd/seqd/replayer"
)

// Fetch protocol: how a member gets the stream packets it lacks from
// another member (the catch-up of an epoch change). One TCP connection per
// request, client first:
//
//	request  (FetchRequestBytes = 24): magic u32 "SQFQ" @0, version u16 @4
//	         (FetchVersion), reserved u16 @6 (0), from u64 @8, to u64 @16
//	         (1 <= from <= to)
//	response: frames, each an 8-byte header, kind u8 @0, reserved [3]byte
//	         (0), length u32 @4, then length bytes:
//	           fetchPacket (1): one stream packet, as stored (its first
//	             record in from..to; packets in stream order, gap-free);
//	           fetchEnd (2): 8 bytes, the highest seq the server holds
//	             whole; the last frame of a complete answer;
//	           fetchError (3): the server's error text (at most
//	             maxFetchErrorBytes), the last frame.
//
// All integers are little-endian. A frame longer than
// replayer.MaxFramePacketBytes is refused by the reader before it reads
// the body, so a peer cannot make it reserve more.

// FetchVersion is the fetch protocol's version; another is refused.
const FetchVersion = 1

// FetchRequestBytes is the size of a fetch request.
const FetchRequestBytes = 24

const (
	fetchMagic         = 0x51465153 // "SQFQ" as little-endian bytes
	fetchHeaderBytes   = 8
	fetchPacket        = 1
	fetchEnd           = 2
	fetchError         = 3
	maxFetchErrorBytes = 1024
	// fetchChunkBytes is how much the server copies out of the store per
	// turn of its lock, so the standby's stream loop waits little.
	fetchChunkBytes = 1 << 20
)

var le = binary.LittleEndian

// appendFetchRequest encodes a request for from..to.
func appendFetchRequest(b []byte, from, to uint64) []byte {
	var r [FetchRequestBytes]byte
	le.PutUint32(r[0:], fetchMagic)
	le.PutUint16(r[4:], FetchVersion)
	le.PutUint64(r[8:], from)
	le.PutUint64(r[16:], to)
	return append(b, r[:]...)
}

// decodeFetchRequest validates a request and returns its range.
func decodeFetchRequest(b []byte) (from, to uint64, err error) {
	switch {
	case len(b) != FetchRequestBytes:
		return 0, 0, ErrFetchProtocol
	case le.Uint32(b) != fetchMagic:
		return 0, 0, ErrFetchProtocol
	case le.Uint16(b[4:]) != FetchVersion:
		return 0, 0, ErrFetchVersion
	case le.Uint16(b[6:]) != 0:
		return 0, 0, ErrFetchProtocol
	}
	from, to = le.Uint64(b[8:]), le.Uint64(b[16:])
	if from == 0 || to < from {
		return 0, 0, ErrFetchRange
	}
	return from, to, nil
}

// putFetchHeader writes a frame header.
func putFetchHeader(b []byte, kind byte, n int) {
	b[0], b[1], b[2], b[3] = kind, 0, 0, 0
	le.PutUint32(b[4:], uint32(n))
}

// decodeFetchHeader validates a response frame header and returns its
// kind and body length.
func decodeFetchHeader(b []byte) (kind byte, n int, err error) {
	if len(b) != fetchHeaderBytes {
		return 0, 0, ErrFetchProtocol
	}
	kind, n64 := b[0], le.Uint32(b[4:])
	if b[1]|b[2]|b[3] != 0 {
		return 0, 0, ErrFetchProtocol
	}
	switch kind {
	case fetchPacket:
		if n64 == 0 || n64 > replayer.MaxFramePacketBytes {
			return 0, 0, ErrFetchProtocol
		}
	case fetchEnd:
		if n64 != 8 {
			return 0, 0, ErrFetchProtocol
		}
	case fetchError:
		if n64 > maxFetchErrorBytes {
			return 0, 0, ErrFetchProtocol
		}
	default:
		return 0, 0, ErrFetchProtocol
	}
	return kind, int(n64), nil
}

// FetchSource is what a PeerServer serves: a member's store, read under
// whatever lock guards it. Standby implements it.
type FetchSource interface {
	// FetchRange appends to dst, as fetch frames (fetchPacket), the
	// stored packets that carry records of from..to, in order, stopping
	// after about maxBytes at a packet whose last record is whole. It
	// returns dst, the next seq to ask for and whether from..to is done
	// (served, or nothing more held); held is the highest seq held whole.
	FetchRange(dst []byte, from, to uint64, maxBytes int) (out []byte, next uint64, done bool, held uint64, err error)
}

// PeerServerConfig tunes a PeerServer.
type PeerServerConfig struct {
	// MaxConns bounds the connections served at once; more wait in the
	// kernel's backlog.
	MaxConns int
	// IOTimeout bounds reading a request and each write of an answer.
	IOTimeout time.Duration
	// Logger gets one line per failed connection (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultPeerServerConfig: 8 connections, 5 s per I/O.
func DefaultPeerServerConfig() PeerServerConfig {
	return PeerServerConfig{MaxConns: 8, IOTimeout: 5 * time.Second}
}

// PeerServer answers fetch requests from a FetchSource on a listener.
type PeerServer struct {
	cfg  PeerServerConfig
	src  FetchSource
	ln   net.Listener
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn map[net.Conn]struct{} // open connections, closed by Close
	done bool
}

// NewPeerServer serves src on ln (Serve starts it; Close stops it and
// closes ln).
func NewPeerServer(cfg PeerServerConfig, src FetchSource, ln net.Listener) (*PeerServer, error) {
	if cfg.MaxConns < 1 || cfg.MaxConns > 1024 {
		return nil, fmt.Errorf("%w: PeerServerConfig.MaxConns = %d, want 1..1024", ErrConfig, cfg.MaxConns)
	}
	if cfg.IOTimeout < time.Millisecond {
		return nil, fmt.Errorf("%w: PeerServerConfig.IOTimeout = %v, want >= 1ms", ErrConfig, cfg.IOTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &PeerServer{cfg: cfg, src: src, ln: ln, sem: make(chan struct{}, cfg.MaxConns), conn: map[net.Conn]struct{}{}}, nil
}

// Addr is the listener's address.
func (s *PeerServer) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until Close; it returns nil after Close, or
// the listener's error.
func (s *PeerServer) Serve() error {
	for {
		s.sem <- struct{}{}
		c, err := s.ln.Accept()
		if err != nil {
			<-s.sem
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
			<-s.sem
			return nil
		}
		s.conn[c] = struct{}{}
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

func (s *PeerServer) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conn, c)
		s.mu.Unlock()
		c.Close()
		<-s.sem
		s.wg.Done()
	}()
	if err := s.answer(c); err != nil {
		s.cfg.Logger.Warn("cluster: fetch", "peer", c.RemoteAddr().String(), "err", err)
	}
}

// answer reads one request and writes the answer.
func (s *PeerServer) answer(c net.Conn) error {
	var req [FetchRequestBytes]byte
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.IOTimeout))
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	from, to, err := decodeFetchRequest(req[:])
	if err != nil {
		s.writeError(c, err)
		return err
	}
	buf := make([]byte, 0, fetchChunkBytes+replayer.MaxFramePacketBytes+fetchHeaderBytes)
	next := from
	for {
		out, n, done, held, err := s.src.FetchRange(buf[:0], next, to, fetchChunkBytes)
		if err != nil {
			s.writeError(c, err)
			return fmt.Errorf("range %d..%d: %w", next, to, err)
		}
		if done {
			var end [fetchHeaderBytes + 8]byte
			putFetchHeader(end[:], fetchEnd, 8)
			le.PutUint64(end[fetchHeaderBytes:], held)
			out = append(out, end[:]...)
		}
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.IOTimeout))
		if _, err := c.Write(out); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if done {
			return nil
		}
		next = n
	}
}

func (s *PeerServer) writeError(c net.Conn, err error) {
	msg := err.Error()
	if len(msg) > maxFetchErrorBytes {
		msg = msg[:maxFetchErrorBytes]
	}
	b := make([]byte, fetchHeaderBytes, fetchHeaderBytes+len(msg))
	putFetchHeader(b, fetchError, len(msg))
	b = append(b, msg...)
	_ = c.SetWriteDeadline(time.Now().Add(s.cfg.IOTimeout))
	_, _ = c.Write(b)
}

// Fetch asks the member at addr for the packets holding from..to and hands
// each to fn, in stream order (pkt is valid only during the call; an
// error from fn ends the fetch with it). It returns the highest seq the
// server holds whole. The answer may stop short of to when the server
// holds less: the caller checks what it got. ctx bounds the whole
// exchange (default 10 s when it has no deadline).
func Fetch(ctx context.Context, addr string, from, to uint64, fn func(pkt []byte) error) (held uint64, err error) {
	if from == 0 || to < from {
		return 0, ErrFetchRange
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w", from, to, addr, err)
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(appendFetchRequest(nil, from, to)); err != nil {
		return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w", from, to, addr, err)
	}
	r := bufio.NewReaderSize(c, 256<<10)
	var hdr [fetchHeaderBytes]byte
	body := make([]byte, 0, 64<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w (answer cut short)", from, to, addr, err)
		}
		kind, n, err := decodeFetchHeader(hdr[:])
		if err != nil {
			return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w", from, to, addr, err)
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, fmt.Errorf("cluster: fetch %d..%d from %s: %w (answer cut short)", from, to, addr, err)
		}
		switch kind {
		case fetchPacket:
			if err := fn(body); err != nil {
				return 0, err
			}
		case fetchEnd:
			return le.Uint64(body), nil
		case fetchError:
			return 0, fmt.Errorf("%w: %s: %s", ErrFetchRefused, addr, body)
		}
	}
}
