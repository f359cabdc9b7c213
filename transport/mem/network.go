package mem

import (
	"math/rand/v2"
	"sync"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
)

// Network joins one server and its clients. See the package comment.
type Network struct {
	cfg Config

	mu      sync.Mutex  // guards everything below and every endpoint's state
	now     int64       // virtual clock, ns
	order   uint64      // frames enqueued so far; orders ties in delivery time
	free    []*frameBuf // recycled frame buffers
	shared  *frameBuf   // the published frame being fanned out, if any
	server  *Server
	clients []*Client // clients[p-1] has Peer p
}

// NewNetwork validates cfg and returns an empty network.
func NewNetwork(cfg Config) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Network{cfg: cfg.withDefaults()}
	n.server = &Server{endpoint: newEndpoint(n, transport.NoPeer)}
	return n, nil
}

// Server returns the network's one server endpoint (the same on every call).
func (n *Network) Server() transport.Server { return n.server }

// Client attaches a new client. Clients get Peers 1, 2, 3, ... in the order
// they attach; the server sees a client's frames as coming from its Peer.
func (n *Network) Client() transport.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := transport.Peer(len(n.clients) + 1)
	c := &Client{endpoint: newEndpoint(n, p)}
	// Link ids give every direction its own fault and delay stream.
	c.out = []*link{n.newLink(uint64(p)*2+1, &c.endpoint, &n.server.endpoint)}
	n.server.out = append(n.server.out, n.newLink(uint64(p)*2, &n.server.endpoint, &c.endpoint))
	n.clients = append(n.clients, c)
	return c
}

// SetNow advances the virtual clock to now (ns); frames whose delivery time
// has come become deliverable and blocked Polls wake. The clock never goes
// back: an earlier now is ignored.
func (n *Network) SetNow(now int64) {
	n.mu.Lock()
	if now > n.now {
		n.now = now
	}
	n.server.wake()
	for _, c := range n.clients {
		c.wake()
	}
	n.mu.Unlock()
}

// Now returns the virtual clock.
func (n *Network) Now() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.now
}

// NextDelivery returns the earliest delivery time of any frame in flight,
// so that a simulator can advance its clock straight to it.
func (n *Network) NextDelivery() (at int64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	consider := func(e *endpoint) {
		if e.in.len() > 0 && (!ok || e.in.peek().at < at) {
			at, ok = e.in.peek().at, true
		}
	}
	consider(&n.server.endpoint)
	for _, c := range n.clients {
		consider(&c.endpoint)
	}
	return at, ok
}

// Pending returns how many frames are in flight (in all inboxes, whether
// deliverable yet or not).
func (n *Network) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	total := n.server.in.len()
	for _, c := range n.clients {
		total += c.in.len()
	}
	return total
}

// Partition cuts (cut=true) or heals the client with Peer p. While cut,
// every frame sent to or from it is dropped, including frames already in
// flight when they come due. Unknown peers are ignored.
func (n *Network) Partition(p transport.Peer, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p >= 1 && int(p) <= len(n.clients) {
		n.clients[p-1].cut = cut
	}
}

// FaultCounters sums what the fault injectors of every link did.
func (n *Network) FaultCounters() fault.Counters {
	n.mu.Lock()
	defer n.mu.Unlock()
	var sum fault.Counters
	add := func(l *link) {
		if l.inj == nil {
			return
		}
		c := l.inj.Counters()
		sum.Passed += c.Passed
		sum.Dropped += c.Dropped
		sum.Duplicated += c.Duplicated
		sum.Reordered += c.Reordered
	}
	for _, c := range n.clients {
		add(c.out[0])
	}
	for _, l := range n.server.out {
		add(l)
	}
	return sum
}

// frameBuf stores a frame in flight. A published frame is copied once and
// shared by every inbox it reaches (handlers only read frames); refs
// counts the inbox entries that still point at it.
type frameBuf struct {
	b    []byte
	refs int
}

// getBuf returns a buffer holding a copy of frame, with no reference yet.
// n.mu is held.
func (n *Network) getBuf(frame []byte) *frameBuf {
	var fb *frameBuf
	if k := len(n.free); k > 0 {
		fb = n.free[k-1]
		n.free[k-1] = nil
		n.free = n.free[:k-1]
	} else {
		fb = &frameBuf{}
	}
	if cap(fb.b) < len(frame) {
		// Round up so a buffer serves later frames of any size up to a
		// datagram without growing again.
		fb.b = make([]byte, len(frame), max(len(frame), 2048))
	}
	fb.b = fb.b[:len(frame)]
	copy(fb.b, frame)
	return fb
}

// putBuf drops one reference to fb and recycles it when none is left.
// n.mu is held.
func (n *Network) putBuf(fb *frameBuf) {
	fb.refs--
	if fb.refs <= 0 {
		fb.refs = 0
		n.free = append(n.free, fb)
	}
}

// publish fans frame out to every link, storing it once. n.mu is held.
func (n *Network) publish(links []*link, frame []byte) {
	fb := n.getBuf(frame)
	fb.refs = 1 // held by the fan-out itself until it ends
	n.shared = fb
	for _, l := range links {
		l.send(fb.b)
	}
	n.shared = nil
	n.putBuf(fb)
}

// link is one direction between the server and one client.
type link struct {
	net      *Network
	src, dst *endpoint
	inj      *fault.Injector // nil without faults
	rng      *rand.Rand      // delays; nil without delays
	deliver  func([]byte)    // l.enqueue, bound once so Pass allocates nothing
}

func (n *Network) newLink(id uint64, src, dst *endpoint) *link {
	l := &link{net: n, src: src, dst: dst}
	if n.cfg.Faults.Enabled() {
		l.inj = fault.New(n.cfg.Faults, id)
	}
	if n.cfg.MaxDelay > 0 {
		l.rng = rand.New(rand.NewPCG(n.cfg.Faults.Seed, id))
	}
	l.deliver = l.enqueue
	return l
}

// send runs frame through the link's faults. n.mu is held.
func (l *link) send(frame []byte) {
	if l.inj == nil {
		l.enqueue(frame)
		return
	}
	lost := l.inj.Counters().Dropped
	l.inj.Pass(frame, l.deliver)
	l.src.c.Dropped += l.inj.Counters().Dropped - lost
}

// release lets a frame held back for reordering go. n.mu is held.
func (l *link) release() {
	if l.inj != nil {
		l.inj.Release(l.deliver)
	}
}

// enqueue copies frame into the destination inbox. n.mu is held.
func (l *link) enqueue(frame []byte) {
	n := l.net
	if l.dst.closed || l.src.cut || l.dst.cut {
		l.src.c.Dropped++
		return
	}
	if l.dst.in.len() >= n.cfg.QueueFrames {
		l.dst.c.Dropped++
		return
	}
	at := n.now
	if l.rng != nil {
		lo, hi := int64(n.cfg.MinDelay), int64(n.cfg.MaxDelay)
		at += lo + l.rng.Int64N(hi-lo+1)
	}
	// The frame is the shared copy of a publish in progress, or one the
	// fault injector held back (its own buffer), or a unicast frame.
	fb := n.shared
	if fb == nil || len(frame) == 0 || len(frame) != len(fb.b) || &frame[0] != &fb.b[0] {
		fb = n.getBuf(frame)
	}
	fb.refs++
	n.order++
	l.dst.in.push(entry{at: at, order: n.order, from: l.src.peer, buf: fb})
	l.dst.wake()
}
