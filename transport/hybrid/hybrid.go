package hybrid

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/transport"
)

// Notifier is the optional ability of an inner server to signal ch
// (without blocking) when frames arrive, so that the hybrid can wait on all
// its servers at once. tcp.Server has it.
type Notifier interface {
	NotifyOnReceive(ch chan<- struct{})
}

// PollSlice bounds how long Poll waits before it polls again the inner
// servers that cannot notify.
const PollSlice = time.Millisecond

// defaultMaxFrameBytes is assumed for an inner server that does not say its
// maximum frame size: one UDP datagram on an Ethernet MTU.
const defaultMaxFrameBytes = 1472

// Server fans a sequencer out to several inner servers.
type Server struct {
	inner  []transport.Server
	routes []transport.Handler // per inner server, built once: route.handle
	shift  uint                // inner peers use the bits below shift
	mask   uint32              // ... selected by mask

	allNotify bool
	ready     chan struct{} // signalled by the Notifier inner servers
	woken     chan struct{} // capacity 1: Wake asks a waiting Poll to return
	closing   chan struct{}
	timer     *time.Timer

	h     transport.Handler // the handler of the Poll in progress
	first int               // inner server polled first by the next Poll

	unroutable, dropped atomic.Uint64
	closed              atomic.Bool
}

var (
	_ transport.Server = (*Server)(nil)
	_ transport.Waker  = (*Server)(nil)
)

// route translates the Peers of one inner server.
type route struct {
	s     *Server
	index uint32
}

func (r *route) handle(frame []byte, from transport.Peer) {
	r.s.h(frame, r.s.outer(r.index, from))
}

// New returns a Server over servers, which it owns from now on.
func New(servers ...transport.Server) (*Server, error) {
	if len(servers) == 0 {
		return nil, ErrNoServers
	}
	indexBits := uint(bits.Len(uint(len(servers) - 1)))
	s := &Server{
		inner:     servers,
		routes:    make([]transport.Handler, len(servers)),
		shift:     32 - indexBits,
		mask:      uint32(uint64(1)<<(32-indexBits) - 1),
		allNotify: true,
		ready:     make(chan struct{}, 1),
		woken:     make(chan struct{}, 1),
		closing:   make(chan struct{}),
		timer:     time.NewTimer(time.Hour),
	}
	s.timer.Stop()
	for i, in := range servers {
		s.routes[i] = (&route{s: s, index: uint32(i)}).handle
		if n, ok := in.(Notifier); ok {
			n.NotifyOnReceive(s.ready)
		} else {
			s.allNotify = false
		}
	}
	return s, nil
}

// NewServer is New for callers that hold a transport.Server; it panics on
// an empty list, a programming error.
func NewServer(servers ...transport.Server) transport.Server {
	s, err := New(servers...)
	if err != nil {
		panic(err)
	}
	return s
}

// Wake makes a waiting Poll return early (transport.Waker); safe from any
// goroutine.
func (s *Server) Wake() {
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

// outer namespaces an inner Peer.
func (s *Server) outer(index uint32, p transport.Peer) transport.Peer {
	if p == transport.NoPeer {
		return transport.NoPeer
	}
	if uint32(p)&^s.mask != 0 {
		s.unroutable.Add(1)
		return transport.NoPeer
	}
	return transport.Peer(uint64(index)<<s.shift | uint64(p))
}

// Inner returns the inner server a Peer belongs to and its Peer there.
func (s *Server) Inner(p transport.Peer) (index int, inner transport.Peer) {
	return int(uint64(p) >> s.shift), transport.Peer(uint32(p) & s.mask)
}

// Publish queues frame on every inner server. It returns the first error
// after trying them all, so one refusing server does not starve the others.
func (s *Server) Publish(frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	var first error
	for _, in := range s.inner {
		if err := in.Publish(frame); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// SendTo queues frame on the inner server that to came from. A Peer no
// inner server produced is dropped and counted, as a departed client is.
func (s *Server) SendTo(to transport.Peer, frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	index, inner := s.Inner(to)
	if index >= len(s.inner) || inner == transport.NoPeer {
		s.dropped.Add(1)
		return nil
	}
	return s.inner[index].SendTo(inner, frame)
}

// Flush flushes every inner server and returns the first error.
func (s *Server) Flush() error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	var first error
	for _, in := range s.inner {
		if err := in.Flush(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Poll hands h the frames of every inner server; see the package comment
// for how it waits. from is a namespaced Peer for SendTo.
func (s *Server) Poll(h transport.Handler, wait time.Duration) (int, error) {
	if s.closed.Load() {
		return 0, transport.ErrClosed
	}
	n, err := s.round(h)
	if n > 0 || err != nil || wait <= 0 {
		return n, err
	}
	deadline := time.Now().Add(wait)
	for {
		slice := wait
		if !s.allNotify {
			slice = min(wait, PollSlice)
		}
		s.timer.Reset(slice)
		select {
		case <-s.ready:
			s.timer.Stop()
		case <-s.timer.C:
		case <-s.woken:
			s.timer.Stop()
			return s.round(h)
		case <-s.closing:
			s.timer.Stop()
			return 0, transport.ErrClosed
		}
		if n, err = s.round(h); n > 0 || err != nil {
			return n, err
		}
		if wait = time.Until(deadline); wait <= 0 {
			return 0, nil
		}
	}
}

// round polls every inner server once without waiting.
func (s *Server) round(h transport.Handler) (int, error) {
	s.h = h
	total := 0
	var first error
	k := len(s.inner)
	for j := range k {
		i := (s.first + j) % k
		n, err := s.inner[i].Poll(s.routes[i], 0)
		total += n
		if err != nil && first == nil {
			first = err
		}
	}
	s.first = (s.first + 1) % k
	s.h = nil
	if s.closed.Load() {
		return total, transport.ErrClosed
	}
	return total, first
}

// Close closes every inner server and returns the first error. A Poll
// waiting in another goroutine returns transport.ErrClosed.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return transport.ErrClosed
	}
	close(s.closing)
	var first error
	for _, in := range s.inner {
		if err := in.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// MaxFrameBytes is the largest frame every inner server carries: the
// smallest of their maxima.
func (s *Server) MaxFrameBytes() int {
	m := 0
	for i, in := range s.inner {
		n := defaultMaxFrameBytes
		if ms, ok := in.(interface{ MaxFrameBytes() int }); ok {
			n = ms.MaxFrameBytes()
		}
		if i == 0 || n < m {
			m = n
		}
	}
	return m
}

// Counters sums the counters of the inner servers that keep them, plus
// frames the hybrid itself dropped (SendTo to an unknown Peer).
func (s *Server) Counters() transport.Counters {
	c := transport.Counters{Dropped: s.dropped.Load()}
	for _, in := range s.inner {
		if st, ok := in.(transport.Stats); ok {
			ic := st.Counters()
			c.FramesSent += ic.FramesSent
			c.FramesReceived += ic.FramesReceived
			c.BytesSent += ic.BytesSent
			c.BytesReceived += ic.BytesReceived
			c.Dropped += ic.Dropped
			c.Refused += ic.Refused
			c.AuthFailed += ic.AuthFailed
		}
	}
	return c
}

// Unroutable counts frames delivered with NoPeer because their inner Peer
// did not fit beside the server index.
func (s *Server) Unroutable() uint64 { return s.unroutable.Load() }
