package tcp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/transport"
)

// Server is the sequencer's end over TCP: every accepted connection is a
// Peer; Publish queues a frame for all of them, SendTo for one.
type Server struct {
	cfg Config
	log *slog.Logger
	ln  net.Listener
	ep  endpoint

	// conns is the endpoint goroutine's copy of live, refreshed when gen
	// moves past seenGen, so that Publish takes no lock.
	conns   []*conn
	seenGen uint64

	// mu guards live, nextPeer and the closed check at registration.
	mu       sync.Mutex
	live     []*conn
	nextPeer uint32
	gen      atomic.Uint64

	closed atomic.Bool
	wg     sync.WaitGroup
}

var _ transport.Server = (*Server)(nil)

// NewServer validates cfg and listens on cfg.Addr.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, log: cfg.logger(), ln: ln}
	s.ep.init(cfg, 0)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the server listens on (the chosen port if cfg.Addr
// had port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: do not spin.
			s.log.Warn("tcp: accept", "addr", s.cfg.Addr, "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed.Load() {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.nextPeer++
		if s.nextPeer == uint32(transport.NoPeer) {
			s.nextPeer++
		}
		c := newConn(nc, transport.Peer(s.nextPeer), s.cfg)
		s.live = append(s.live, c)
		s.gen.Add(1)
		s.wg.Add(2)
		s.mu.Unlock()
		go c.writeLoop(s.log, &s.wg)
		go s.readLoop(c)
	}
}

func (s *Server) readLoop(c *conn) {
	defer s.wg.Done()
	c.readLoop(s.ep.inbox, newFrameReader(s.cfg.ReadBufferBytes, s.cfg.MaxFrameBytes), &s.ep, s.log)
	s.mu.Lock()
	for i, l := range s.live {
		if l == c {
			s.live = append(s.live[:i], s.live[i+1:]...)
			break
		}
	}
	s.gen.Add(1)
	s.mu.Unlock()
}

// refresh picks up connections accepted or lost since the last call.
func (s *Server) refresh() {
	if g := s.gen.Load(); g != s.seenGen {
		s.mu.Lock()
		clear(s.conns)
		s.conns = append(s.conns[:0], s.live...)
		s.seenGen = s.gen.Load()
		s.mu.Unlock()
	}
}

// Publish queues frame for every connected client. A client that connected
// after the last Flush or Poll sees frames from the next call on.
func (s *Server) Publish(frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	if len(frame) > s.cfg.MaxFrameBytes {
		return transport.ErrFrameTooLarge
	}
	s.refresh()
	for _, c := range s.conns {
		s.queue(c, frame)
	}
	return nil
}

// SendTo queues frame for one client. A peer that is gone is not an error
// (the client may have disconnected since its request): the frame is
// dropped and counted.
func (s *Server) SendTo(to transport.Peer, frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	if len(frame) > s.cfg.MaxFrameBytes {
		return transport.ErrFrameTooLarge
	}
	s.refresh()
	for _, c := range s.conns {
		if c.peer == to {
			s.queue(c, frame)
			return nil
		}
	}
	s.ep.dropped.Add(1)
	return nil
}

func (s *Server) queue(c *conn, frame []byte) {
	if c.dead.Load() {
		return
	}
	c.out = appendFrame(c.out, frame)
	s.ep.framesSent.Add(1)
	s.ep.bytesSent.Add(uint64(len(frame)))
	if len(c.out) > s.cfg.SlowClientBytes {
		s.dropSlow(c)
	}
}

func (s *Server) dropSlow(c *conn) {
	s.ep.slow.Add(1)
	c.out = c.out[:0]
	c.kill(ErrSlowClient, s.log)
}

// Flush hands every connection's queued frames to its writer goroutine,
// which writes them with one Write. A connection whose unwritten bytes
// exceed SlowClientBytes is closed.
func (s *Server) Flush() error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	s.refresh()
	for _, c := range s.conns {
		if c.dead.Load() {
			continue
		}
		if pending := c.enqueue(&c.out); pending > s.cfg.SlowClientBytes {
			s.dropSlow(c)
		}
	}
	return nil
}

// Poll flushes, then calls h for every frame received from any client,
// waiting up to wait for the first. from is the sending connection's Peer.
func (s *Server) Poll(h transport.Handler, wait time.Duration) (int, error) {
	if err := s.Flush(); err != nil {
		return 0, err
	}
	return s.ep.poll(h, wait)
}

// NotifyOnReceive makes the server also signal ch (without blocking: give
// it a buffer of 1) whenever frames arrive, so that a caller serving
// several endpoints from one goroutine (package hybrid) can wait on all of
// them at once. Call it before polling.
func (s *Server) NotifyOnReceive(ch chan<- struct{}) { s.ep.inbox.also.Store(&ch) }

// Disconnect closes the connection of peer (an operator kicking a node, or
// a test). The client reconnects by itself. It reports whether peer was
// connected.
func (s *Server) Disconnect(peer transport.Peer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.live {
		if c.peer == peer && !c.dead.Load() {
			c.kill(ErrDisconnected, s.log)
			return true
		}
	}
	return false
}

// Peers appends the Peer of every open connection to dst.
func (s *Server) Peers(dst []transport.Peer) []transport.Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.live {
		if !c.dead.Load() {
			dst = append(dst, c.peer)
		}
	}
	return dst
}

// Close stops listening, closes every connection and waits for their
// goroutines. A concurrent Poll returns transport.ErrClosed.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return transport.ErrClosed
	}
	close(s.ep.closing)
	err := s.ln.Close()
	s.mu.Lock()
	for _, c := range s.live {
		c.kill(transport.ErrClosed, s.log)
	}
	s.mu.Unlock()
	s.ep.inbox.close()
	s.wg.Wait()
	return err
}

// Counters returns the server's totals. FramesSent counts one per frame
// per connection it was queued for.
func (s *Server) Counters() transport.Counters { return s.ep.counters() }

// Drops counts connections the server closed for cause.
func (s *Server) Drops() Drops { return s.ep.drops() }

// Clients is the number of connections currently open.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.live {
		if !c.dead.Load() {
			n++
		}
	}
	return n
}

// Drops counts connections closed for cause.
type Drops struct {
	OversizedFrames uint64 // the peer announced a frame above MaxFrameBytes
	SlowClients     uint64 // the send queue exceeded SlowClientBytes
}

func (e *endpoint) drops() Drops {
	return Drops{OversizedFrames: e.oversized.Load(), SlowClients: e.slow.Load()}
}
