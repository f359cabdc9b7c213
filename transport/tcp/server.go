package tcp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/epoll"
	"github.com/seqd/seqd/transport"
)

// Server is the sequencer's end over TCP: every accepted connection is a
// Peer; Publish queues a frame for all of them, SendTo for one.
//
// Peers: a connection takes one of MaxConns slots, and its Peer is the
// slot with the slot's generation, which moves on every time the slot is
// freed. A freed slot goes to the back of the free list, so a Peer comes
// back only after 2^(transport.PeerBits - slot bits) reuses of one slot;
// the Peer of a closed connection never reaches a newer one (SendTo to it
// is dropped and counted).
type Server struct {
	cfg Config
	ln  net.Listener
	ep  endpoint

	// conns and bySlot are the endpoint goroutine's copy of live,
	// refreshed when gen moves past seenGen, so that Publish and SendTo
	// take no lock.
	conns   []*conn
	bySlot  []*conn
	seenGen uint64
	// pub holds the frames published since the last Flush, with their
	// length prefixes, once for all connections (endpoint goroutine
	// only): each connection's share starts at its pubFrom. Publish
	// copies a frame once, not once per connection, and Flush writes it
	// to idle sockets straight from here.
	pub []byte

	// mu guards live, slotGen, free and the closed check at registration.
	mu       sync.Mutex
	live     []*conn
	slotGen  []uint32 // generation of each slot's current or next occupant
	free     []int32  // free slots, oldest freed first
	slotBits uint
	gen      atomic.Uint64

	closed atomic.Bool
	wg     sync.WaitGroup
	// shaking bounds the TLS handshakes in progress (Config.TLS).
	shaking chan struct{}
	tls     *tls.Config
}

var (
	_ transport.Server = (*Server)(nil)
	_ transport.Waker  = (*Server)(nil)
)

// Wake makes a waiting Poll return early (transport.Waker); safe from any
// goroutine: a cluster primary blocks in Poll until its next timed work
// and is woken when it must stop.
func (s *Server) Wake() { s.ep.poller.Wake() }

// NewServer validates cfg and listens on cfg.Addr.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", cfg.Addr, err)
	}
	s, err := serveOn(cfg, ln)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return s, nil
}

// serveOn serves on ln (tests wrap the listener's connections).
func serveOn(cfg Config, ln net.Listener) (*Server, error) {
	p, err := newPoller(false)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, ln: ln,
		bySlot:   make([]*conn, cfg.MaxConns),
		slotGen:  make([]uint32, cfg.MaxConns),
		free:     make([]int32, cfg.MaxConns),
		slotBits: uint(bits.Len(uint(cfg.MaxConns))),
		pub:      make([]byte, 0, cfg.WriteBufferBytes),
		shaking:  make(chan struct{}, maxHandshakes),
	}
	if cfg.TLS != nil {
		s.tls = cfg.TLS.Server(cfg.TLSPeers)
	}
	for i := range s.free {
		s.free[i] = int32(i)
	}
	s.ep.init(cfg, 0, "server", p)
	s.ep.connOf = s.connOf
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// connOf is the connection of an event's key (its slot and Peer), nil if
// it is gone. Endpoint goroutine only.
func (s *Server) connOf(slot, peer int32) *conn {
	if slot < 0 || int(slot) >= len(s.bySlot) {
		return nil
	}
	c := s.bySlot[slot]
	if c == nil || c.peer != transport.Peer(peer) {
		// Accepted since the last refresh (the poller learns of a
		// connection after gen moves), or gone.
		s.refresh()
		if c = s.bySlot[slot]; c == nil || c.peer != transport.Peer(peer) {
			return nil
		}
	}
	return c
}

// Addr is the address the server listens on (the chosen port if cfg.Addr
// had port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// peerOf is the Peer of the occupant of slot in generation gen.
func (s *Server) peerOf(slot int32, gen uint32) transport.Peer {
	genMask := uint32(1)<<(transport.PeerBits-s.slotBits) - 1
	return transport.Peer((gen&genMask)<<s.slotBits | uint32(slot+1))
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: do not spin.
			s.ep.closes.Note(1, fmt.Errorf("accept on %s: %w", s.cfg.Addr, err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if s.tls != nil {
			select {
			case s.shaking <- struct{}{}:
				s.wg.Add(1)
				go s.handshake(nc)
			default:
				s.ep.refusedConns.Add(1)
				s.ep.closes.Note(1, fmt.Errorf("%w (%d handshakes at once): %s", ErrTooManyConns, cap(s.shaking), nc.RemoteAddr()))
				_ = nc.Close()
			}
			continue
		}
		if !s.admit(nc) {
			return
		}
	}
}

// handshake runs the TLS handshake of an accepted connection, bounded by
// DialTimeout, then admits it; a refused peer is logged with why.
func (s *Server) handshake(nc net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.shaking }()
	tc := tls.Server(nc, s.tls)
	_ = tc.SetDeadline(time.Now().Add(s.cfg.DialTimeout))
	if err := tc.Handshake(); err != nil {
		s.ep.refusedConns.Add(1)
		s.ep.closes.Note(1, fmt.Errorf("%w: %s: %w", ErrHandshake, nc.RemoteAddr(), err))
		_ = nc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	s.admit(tc)
}

// admit gives nc a slot (or closes it when none is free); false when the
// server closed.
func (s *Server) admit(nc net.Conn) bool {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		_ = nc.Close()
		return false
	}
	if len(s.free) == 0 {
		s.mu.Unlock()
		s.ep.refusedConns.Add(1)
		s.ep.closes.Note(1, fmt.Errorf("%w (%d): %s", ErrTooManyConns, s.cfg.MaxConns, nc.RemoteAddr()))
		_ = nc.Close()
		return true
	}
	slot := s.free[0]
	s.free = s.free[1:]
	c := newConn(nc, s.peerOf(slot, s.slotGen[slot]), s.cfg, &s.ep)
	c.slot = slot
	s.live = append(s.live, c)
	s.gen.Add(1)
	// After gen moved: an event of c finds it (connOf refreshes).
	err := c.register(slot, int32(c.peer))
	s.wg.Add(2)
	s.mu.Unlock()
	if err != nil {
		c.kill(err)
	}
	go c.writeLoop(&s.wg)
	go s.readLoop(c)
	return true
}

// readLoop reads c into the inbox if Poll cannot read it (see conn),
// else waits for it to die; then it frees c's slot.
func (s *Server) readLoop(c *conn) {
	defer s.wg.Done()
	if c.polled {
		<-c.done
	} else {
		c.readLoop(s.ep.readerInbox(), newFrameReader(s.cfg.ReadBufferBytes, s.cfg.MaxFrameBytes))
	}
	s.mu.Lock()
	for i, l := range s.live {
		if l == c {
			s.live = append(s.live[:i], s.live[i+1:]...)
			break
		}
	}
	// The slot's next occupant gets a new Peer, and the slot is reused
	// last, so that this Peer stays unused as long as possible.
	s.slotGen[c.slot]++
	s.free = append(s.free, c.slot)
	s.gen.Add(1)
	s.mu.Unlock()
}

// refresh picks up connections accepted or lost since the last call.
func (s *Server) refresh() {
	if g := s.gen.Load(); g != s.seenGen {
		s.mu.Lock()
		clear(s.conns)
		s.conns = append(s.conns[:0], s.live...)
		clear(s.bySlot)
		for _, c := range s.conns {
			s.bySlot[c.slot] = c
			if !c.seen {
				// It gets the frames published from now on.
				c.seen, c.pubFrom = true, len(s.pub)
			}
		}
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
	if len(frame) > s.cfg.maxUnsigned() {
		return transport.ErrFrameTooLarge
	}
	s.refresh()
	before := len(s.pub)
	var err error
	if s.pub, err = appendSigned(s.pub, frame, s.cfg.Auth); err != nil {
		return err
	}
	n := 0
	for _, c := range s.conns {
		if c.dead.Load() {
			continue
		}
		n++
		if len(c.out)+len(s.pub)-c.pubFrom > s.cfg.MaxQueueBytes {
			s.dropSlow(c)
		}
	}
	if n == 0 {
		// Nobody to write it to: pub holds only what a live connection
		// will be written.
		s.pub = s.pub[:before]
		return nil
	}
	s.ep.framesSent.Add(uint64(n))
	s.ep.bytesSent.Add(uint64(n * len(frame)))
	return nil
}

// SendTo queues frame for one client. A peer that is gone is not an error
// (the client may have disconnected since its request): the frame is
// dropped and counted, and never reaches a newer connection.
func (s *Server) SendTo(to transport.Peer, frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	if len(frame) > s.cfg.maxUnsigned() {
		return transport.ErrFrameTooLarge
	}
	s.refresh()
	if slot := int(uint32(to)&(1<<s.slotBits-1)) - 1; slot >= 0 && slot < len(s.bySlot) {
		if c := s.bySlot[slot]; c != nil && c.peer == to && !c.dead.Load() {
			return s.queue(c, frame)
		}
	}
	s.ep.dropped.Add(1)
	return nil
}

// queue queues frame for c alone, after c's share of pub so far.
func (s *Server) queue(c *conn, frame []byte) error {
	if c.dead.Load() {
		return nil
	}
	if c.pubFrom < len(s.pub) {
		c.out = append(c.out, s.pub[c.pubFrom:]...)
		c.pubFrom = len(s.pub)
	}
	var err error
	if c.out, err = appendSigned(c.out, frame, s.cfg.Auth); err != nil {
		return err
	}
	s.ep.framesSent.Add(1)
	s.ep.bytesSent.Add(uint64(len(frame)))
	if len(c.out) > s.cfg.MaxQueueBytes {
		s.dropSlow(c)
	}
	return nil
}

func (s *Server) dropSlow(c *conn) {
	s.ep.slow.Add(1)
	c.out = c.out[:0]
	c.pubFrom = len(s.pub)
	c.kill(ErrSlowClient)
}

// directWriteConns is the most connections a Server writes directly (see
// conn).
const directWriteConns = 8

// Flush hands every connection's queued frames to its writer goroutine,
// which writes them; with few connections whose writers are idle, it
// writes what the sockets take at once itself. A connection that does not
// read is closed (see Config.SlowClientBytes and MaxQueueBytes).
func (s *Server) Flush() error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	s.refresh()
	// A few connections are written by the sequencer's goroutine when
	// their writers are idle; many are left to their writers, which run
	// in parallel, so that one flush is not a long run of system calls.
	direct := len(s.conns) <= directWriteConns
	for _, c := range s.conns {
		shared := s.pub[min(c.pubFrom, len(s.pub)):]
		c.pubFrom = 0
		if c.dead.Load() {
			continue
		}
		if len(c.out) == 0 && len(shared) == 0 {
			continue // nothing new: the stall clock, if any, runs on
		}
		if pending := c.enqueue(&c.out, shared, direct); c.tooSlow(pending, &s.cfg) {
			s.dropSlow(c)
			c.pubFrom = 0
		}
	}
	s.pub = s.pub[:0]
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
//
// The server's Poll reads its sockets itself, so a goroutine waits on an
// edge-triggered set of them (see poller) and signals ch on each arrival:
// one hand-off per burst, as the reader goroutines made before.
func (s *Server) NotifyOnReceive(ch chan<- struct{}) {
	s.ep.also.Store(&ch)
	n, err := newPoller(true)
	if err != nil {
		// No notifier: a hybrid waiting on ch would not learn of
		// frames; log it and let the caller find the frames by
		// polling (it polls again at least every PollSlice when an
		// inner server cannot notify; here it cannot tell).
		s.ep.closes.Note(1, fmt.Errorf("notify on receive: %w", err))
		return
	}
	s.mu.Lock()
	if s.closed.Load() || !s.ep.notifier.CompareAndSwap(nil, n) {
		s.mu.Unlock()
		n.Close()
		return
	}
	for _, c := range s.live {
		if c.polled {
			_ = c.raw.Control(func(fd uintptr) { _ = n.Add(int(fd), c.slot, int32(c.peer)) })
		}
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.notify(n, ch)
}

// notify signals ch whenever a socket in n receives, until Close.
func (s *Server) notify(n *epoll.Set, ch chan<- struct{}) {
	defer s.wg.Done()
	defer n.Close()
	for !s.closed.Load() {
		events, _, _, err := n.Wait(-1)
		if err != nil {
			s.ep.closes.Note(1, fmt.Errorf("notify on receive: %w", err))
			return
		}
		if len(events) > 0 {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Disconnect closes the connection of peer (an operator kicking a node, or
// a test). The client reconnects by itself. It reports whether peer was
// connected.
func (s *Server) Disconnect(peer transport.Peer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.live {
		if c.peer == peer && !c.dead.Load() {
			c.kill(ErrDisconnected)
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
		c.kill(transport.ErrClosed)
	}
	s.mu.Unlock()
	if n := s.ep.notifier.Load(); n != nil {
		n.ForceWake()
	}
	s.ep.close()
	s.wg.Wait()
	return err
}

// Counters returns the server's totals. FramesSent counts one per frame
// per connection it was queued for.
func (s *Server) Counters() transport.Counters { return s.ep.counters() }

// AuthFailures returns the received frames that failed authentication
// (Config.Auth), by the kind their prefix claims (wire.Kind; junk counts
// under 0).
func (s *Server) AuthFailures() [8]uint64 { return s.ep.authFailed.ByKind() }

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

// Drops counts connections closed for cause, or refused.
type Drops struct {
	OversizedFrames uint64 // the peer announced a frame above MaxFrameBytes
	SlowClients     uint64 // the peer did not read (SlowClientBytes, SlowClientTimeout, MaxQueueBytes)
	WriteFailures   uint64 // a write to the connection failed (reset, timeout...)
	RefusedConns    uint64 // Server: accepted beyond MaxConns and closed at once
}

func (e *endpoint) drops() Drops {
	return Drops{
		OversizedFrames: e.oversized.Load(), SlowClients: e.slow.Load(),
		WriteFailures: e.writeFailed.Load(), RefusedConns: e.refusedConns.Load(),
	}
}
