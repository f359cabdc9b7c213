package mem

import (
	"time"

	"github.com/seqd/seqd/transport"
)

// endpoint is what the server and the clients share: an inbox, the Poll
// loop and Close. Fields other than net, peer, notify, done and timer are
// guarded by net.mu.
type endpoint struct {
	net    *Network
	peer   transport.Peer // NoPeer for the server
	in     inbox
	closed bool
	cut    bool    // partitioned (clients only)
	out    []*link // outgoing links; the server's out[p-1] leads to Peer p
	c      transport.Counters

	notify chan struct{} // capacity 1: "something may be deliverable"
	woken  chan struct{} // capacity 1: Wake asks a waiting Poll to return
	done   chan struct{} // closed by Close, wakes a blocked Poll
	timer  *time.Timer   // Poll's wait, reused
}

func newEndpoint(n *Network, p transport.Peer) endpoint {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return endpoint{
		net:    n,
		peer:   p,
		notify: make(chan struct{}, 1),
		woken:  make(chan struct{}, 1),
		done:   make(chan struct{}),
		timer:  t,
	}
}

// wake tells a blocked Poll to look again. It never blocks.
func (e *endpoint) wake() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// MaxFrameBytes is the largest frame the endpoint sends.
func (e *endpoint) MaxFrameBytes() int { return e.net.cfg.MaxFrameBytes }

// Counters returns the endpoint's totals (transport.Stats). Dropped counts
// frames this endpoint sent that faults, partitions or a closed peer
// discarded, and frames that arrived at its full inbox.
func (e *endpoint) Counters() transport.Counters {
	e.net.mu.Lock()
	c := e.c
	e.net.mu.Unlock()
	return c
}

// Flush does nothing: sends are enqueued at once. It fails after Close.
func (e *endpoint) Flush() error {
	e.net.mu.Lock()
	closed := e.closed
	e.net.mu.Unlock()
	if closed {
		return transport.ErrClosed
	}
	return nil
}

// Poll hands h every frame that is deliverable now, waiting up to wait (in
// real time) for one if there is none.
func (e *endpoint) Poll(h transport.Handler, wait time.Duration) (int, error) {
	n, err := e.drain(h)
	if n > 0 || err != nil || wait <= 0 {
		return n, err
	}
	e.timer.Reset(wait)
	for {
		select {
		case <-e.notify:
		case <-e.woken:
			e.timer.Stop()
			return e.drain(h)
		case <-e.done:
			e.timer.Stop()
			return 0, transport.ErrClosed
		case <-e.timer.C:
			// One last look: a frame may have come due as the wait ended.
			return e.drain(h)
		}
		n, err = e.drain(h)
		if n > 0 || err != nil {
			e.timer.Stop()
			return n, err
		}
	}
}

// drain delivers the frames deliverable now, at most as many as were queued
// when it started so that a fast sender cannot keep it looping. When it
// finds nothing the endpoint is idle, and frames its own outgoing links
// held back for reordering are let go (late, not lost).
func (e *endpoint) drain(h transport.Handler) (int, error) {
	n := e.net
	n.mu.Lock()
	if e.closed {
		n.mu.Unlock()
		return 0, transport.ErrClosed
	}
	delivered := 0
	for budget := e.in.len(); budget > 0 && e.in.len() > 0 && e.in.peek().at <= n.now; budget-- {
		ent := e.in.pop()
		if e.cut || (ent.from != transport.NoPeer && n.clients[ent.from-1].cut) {
			e.c.Dropped++
			n.putBuf(ent.buf)
			continue
		}
		e.c.FramesReceived++
		e.c.BytesReceived += uint64(len(ent.buf.b))
		n.mu.Unlock()
		h(ent.buf.b, ent.from)
		n.mu.Lock()
		n.putBuf(ent.buf)
		delivered++
		if e.closed {
			break
		}
	}
	if delivered == 0 {
		for _, l := range e.out {
			l.release()
		}
	}
	n.mu.Unlock()
	return delivered, nil
}

// Close releases the endpoint: queued frames are discarded, frames sent to
// it later are dropped, and a blocked Poll returns ErrClosed.
func (e *endpoint) Close() error {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.closed {
		return transport.ErrClosed
	}
	e.closed = true
	for e.in.len() > 0 {
		n.putBuf(e.in.pop().buf)
	}
	close(e.done)
	return nil
}

// checkSend validates an outgoing frame and counts it. n.mu is held.
func (e *endpoint) checkSend(frame []byte) error {
	if len(frame) > e.net.cfg.MaxFrameBytes {
		return transport.ErrFrameTooLarge
	}
	if e.closed {
		return transport.ErrClosed
	}
	e.c.FramesSent++
	e.c.BytesSent += uint64(len(frame))
	return nil
}

// Server is the network's server end.
type Server struct {
	endpoint
}

var (
	_ transport.Server = (*Server)(nil)
	_ transport.Stats  = (*Server)(nil)
)

// Publish copies frame to every client's inbox.
func (s *Server) Publish(frame []byte) error {
	n := s.net
	n.mu.Lock()
	err := s.checkSend(frame)
	if err == nil {
		n.publish(s.out, frame)
	}
	n.mu.Unlock()
	return err
}

// SendTo copies frame to the inbox of the client with Peer to.
func (s *Server) SendTo(to transport.Peer, frame []byte) error {
	n := s.net
	n.mu.Lock()
	err := s.checkSend(frame)
	if err == nil {
		if to == transport.NoPeer || int(to) > len(s.out) {
			err = ErrUnknownPeer
		} else {
			s.out[to-1].send(frame)
		}
	}
	n.mu.Unlock()
	return err
}

// Client is one client end.
type Client struct {
	endpoint
}

var (
	_ transport.Client = (*Client)(nil)
	_ transport.Stats  = (*Client)(nil)
	_ transport.Waker  = (*Client)(nil)
	_ transport.Waker  = (*Server)(nil)
)

// Wake makes a waiting Poll return early (transport.Waker); safe from any
// goroutine. The Server has it too.
func (e *endpoint) Wake() {
	select {
	case e.woken <- struct{}{}:
	default:
	}
}

// Peer is how the server sees this client.
func (c *Client) Peer() transport.Peer { return c.peer }

// Send copies frame to the server's inbox.
func (c *Client) Send(frame []byte) error {
	n := c.net
	n.mu.Lock()
	err := c.checkSend(frame)
	if err == nil {
		c.out[0].send(frame)
	}
	n.mu.Unlock()
	return err
}
