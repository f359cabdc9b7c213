package tcp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/epoll"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/transport"
)

// Client is a node's end over TCP. It keeps one connection to a server
// (cfg.Addr, or one of cfg.Addrs) and reconnects on its own, with
// backoff, when it drops: to the next of cfg.Addrs first, so that it
// follows a cluster's primary from member to member. Frames flushed while
// disconnected are dropped (counted): the node resends unacked commands
// and repairs the stream gap by NAK, so the transport does not resume
// itself.
type Client struct {
	cfg   Config
	ep    endpoint
	addrs []string     // the servers, tried in turn
	at    atomic.Int32 // index in addrs of the current (or last) server

	out       []byte // owned by the endpoint goroutine: frames Sent since the last Flush
	outFrames int

	// peer labels the frames this client's connections receive: NoPeer
	// for the sequencer, a source's Peer for a repair source, whose
	// connections the owning client's Poll reads.
	peer    transport.Peer
	sources []*Client // repair sources (AddSource), endpoint goroutine only

	// mu orders connection changes against Close, so that no connection
	// is installed after Close.
	mu         sync.Mutex
	cur        atomic.Pointer[conn]
	reconnects atomic.Uint64

	closed atomic.Bool
	wg     sync.WaitGroup
	tls    *tls.Config // cfg.TLS's client configuration, or nil
}

var (
	_ transport.Client  = (*Client)(nil)
	_ transport.Waker   = (*Client)(nil)
	_ transport.Sourcer = (*Client)(nil)
)

// newClient makes a Client and its poller; a source (home set) shares
// its owner's poller and inbox.
func newClient(cfg Config, peer transport.Peer, stream uint64, name string, home *endpoint) (*Client, error) {
	c := &Client{cfg: cfg, out: make([]byte, 0, cfg.WriteBufferBytes), addrs: cfg.serverAddrs(), peer: peer, tls: clientTLS(&cfg)}
	var p *epoll.Set
	if home != nil {
		p = home.poller
	} else {
		var err error
		if p, err = newPoller(false); err != nil {
			return nil, err
		}
	}
	c.ep.init(cfg, stream, name, p)
	c.ep.home, c.ep.shared = home, home != nil
	c.ep.connOf = c.connOf
	return c, nil
}

// connOf is the connection of an event's key: lo is the Peer of the
// client (NoPeer) or source whose connection it is. A connection that
// has died since is skipped by the reader, and a newer one's read finds
// nothing or its own frames.
func (c *Client) connOf(lo, _ int32) *conn {
	if lo == 0 {
		return c.cur.Load()
	}
	if i := int(lo) - 1; i < len(c.sources) {
		return c.sources[i].cur.Load()
	}
	return nil
}

// Dial validates cfg and connects to the first of its addresses that
// accepts (cfg.Addr, or cfg.Addrs in order). The first connection is
// made before Dial returns, so wrong addresses fail here (the error names
// each); later ones are made in the background.
func Dial(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	tcfg := clientTLS(&cfg)
	for i, a := range cfg.serverAddrs() {
		nc, err := dialConn(&cfg, tcfg, a)
		if err != nil {
			errs = append(errs, fmt.Errorf("tcp: dial %s: %w", a, err))
			continue
		}
		c, err := newClient(cfg, transport.NoPeer, 1, "client", nil)
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		c.at.Store(int32(i))
		// The first connection is installed before Dial returns, so
		// that frames sent right away are not dropped.
		cn := newConn(nc, c.peer, cfg, &c.ep)
		c.cur.Store(cn)
		c.wg.Add(1)
		go c.run(cn)
		return c, nil
	}
	return nil, errors.Join(errs...)
}

// clientTLS is cfg.TLS's client configuration (nil: plain TCP).
func clientTLS(cfg *Config) *tls.Config {
	if cfg.TLS == nil {
		return nil
	}
	return cfg.TLS.Client(cfg.TLSPeers)
}

// dialConn connects to addr within cfg.DialTimeout, and handshakes TLS when
// cfg.TLS is set (a refusal is explained: tlsconf.Explain).
func dialConn(cfg *Config, tcfg *tls.Config, addr string) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, cfg.DialTimeout)
	if err != nil || tcfg == nil {
		return nc, err
	}
	tc := tls.Client(nc, tcfg)
	_ = tc.SetDeadline(time.Now().Add(cfg.DialTimeout))
	if err := tc.Handshake(); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("%w: %w", ErrHandshake, tlsconf.Explain(addr, err))
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// Open validates cfg and returns a Client that connects in the
// background, as it reconnects: for a process that starts before any
// server accepts (a cluster's standby before the first primary is
// elected). Frames flushed before it connects are dropped (counted).
func Open(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := newClient(cfg, transport.NoPeer, 1, "client", nil)
	if err != nil {
		return nil, err
	}
	c.at.Store(int32(len(c.addrs) - 1)) // the first round starts at the first address
	c.wg.Add(1)
	go c.run(nil)
	return c, nil
}

// run owns the connection: it serves one until it dies, then dials the
// addresses in turn, from the one after the server that went away, with
// backoff between rounds, until one accepts or the client closes.
func (c *Client) run(cn *conn) {
	defer c.wg.Done()
	// A client or source started before its server was reachable has no
	// connection and dials at once.
	first := cn == nil
	connected := cn != nil
	backoff := c.cfg.ReconnectMin
	for {
		if cn != nil {
			t0 := time.Now()
			c.serve(cn)
			// A connection that served a while ended the usual way
			// (its server went away): start again from the shortest
			// backoff. One that ends at once (a server that accepts
			// and closes) keeps backing off.
			if time.Since(t0) >= c.cfg.ReconnectMax {
				backoff = c.cfg.ReconnectMin
			}
		}
		cn = nil
		for cn == nil {
			// Jitter spreads the reconnects of many nodes after a restart.
			sleep := backoff/2 + rand.N(backoff/2+1)
			if first {
				sleep, first = 0, false
			}
			select {
			case <-c.ep.closing:
				return
			case <-time.After(sleep):
			}
			if cn = c.dialRound(); cn == nil {
				backoff = min(2*backoff, c.cfg.ReconnectMax)
			}
			if c.closed.Load() {
				return
			}
		}
		if connected {
			c.reconnects.Add(1)
		}
		connected = true
	}
}

// dialRound tries every address once, from the one after the last
// server, and installs the first connection made (nil if none, or if the
// client closed meanwhile).
func (c *Client) dialRound() *conn {
	at := int(c.at.Load())
	for k := 1; k <= len(c.addrs); k++ {
		i := (at + k) % len(c.addrs)
		nc, err := dialConn(&c.cfg, c.tls, c.addrs[i])
		if err != nil {
			if errors.Is(err, ErrHandshake) {
				c.ep.closes.Note(1, err)
			}
			continue
		}
		cn := newConn(nc, c.peer, c.cfg, &c.ep)
		c.mu.Lock()
		if c.closed.Load() {
			c.mu.Unlock()
			cn.kill(transport.ErrClosed) // nc is cn's now (see detach)
			return nil
		}
		c.at.Store(int32(i))
		c.cur.Store(cn)
		c.mu.Unlock()
		return cn
	}
	return nil
}

// ServerAddr is the address of the server the client is connected to,
// or was last (the first address before any connection). Safe from any
// goroutine.
func (c *Client) ServerAddr() string {
	return c.addrs[int(c.at.Load())%len(c.addrs)]
}

// serve runs the current connection until it dies: the endpoint's Poll
// reads it (see poller), so this goroutine only waits; a connection with
// no file descriptor is read here into the inbox.
func (c *Client) serve(cn *conn) {
	var writer sync.WaitGroup
	writer.Add(1)
	go cn.writeLoop(&writer)
	if cn.polled {
		if err := cn.register(int32(c.peer), 0); err != nil {
			cn.kill(err)
		}
		// Poll reads the socket from now on (a wait in progress
		// learns of it too); it notices the end too.
		<-cn.done
	} else {
		cn.readLoop(c.ep.readerInbox(), newFrameReader(c.cfg.ReadBufferBytes, c.cfg.MaxFrameBytes))
	}
	writer.Wait()
}

// Send queues frame for the sequencer.
func (c *Client) Send(frame []byte) error {
	if c.closed.Load() {
		return transport.ErrClosed
	}
	if len(frame) > c.cfg.maxUnsigned() {
		return transport.ErrFrameTooLarge
	}
	var err error
	if c.out, err = appendSigned(c.out, frame, c.cfg.Auth); err != nil {
		return err
	}
	c.outFrames++
	c.ep.framesSent.Add(1)
	c.ep.bytesSent.Add(uint64(len(frame)))
	if len(c.out) > c.cfg.MaxQueueBytes {
		c.dropQueue(true)
	}
	return nil
}

// Flush hands the queued frames to the connection's writer, or drops them
// if there is no connection right now.
func (c *Client) Flush() error {
	if c.closed.Load() {
		return transport.ErrClosed
	}
	for _, src := range c.sources {
		_ = src.Flush()
	}
	if c.outFrames == 0 {
		return nil
	}
	cn := c.cur.Load()
	if cn == nil || cn.dead.Load() {
		c.dropQueue(false)
		return nil
	}
	c.outFrames = 0
	// One connection: the node's goroutine writes it directly when it can.
	if pending := cn.enqueue(&c.out, nil, true); cn.tooSlow(pending, &c.cfg) {
		// The sequencer does not read: start over on a new connection.
		c.ep.slow.Add(1)
		cn.kill(ErrSlowClient)
	}
	return nil
}

func (c *Client) dropQueue(slow bool) {
	c.ep.dropped.Add(uint64(c.outFrames))
	c.out, c.outFrames = c.out[:0], 0
	if slow {
		c.ep.slow.Add(1)
		if cn := c.cur.Load(); cn != nil {
			cn.kill(ErrSlowClient)
		}
	}
}

// Poll flushes, then calls h for every frame received from the sequencer
// (from is NoPeer), waiting up to wait for the first.
func (c *Client) Poll(h transport.Handler, wait time.Duration) (int, error) {
	if err := c.Flush(); err != nil {
		return 0, err
	}
	return c.ep.poll(h, wait)
}

// Wake makes a waiting Poll return early (transport.Waker); safe from any
// goroutine.
func (c *Client) Wake() { c.ep.poller.Wake() }

// Reconnects counts the connections made after the first one.
func (c *Client) Reconnects() uint64 { return c.reconnects.Load() }

// Connected reports whether the client has a live connection now.
func (c *Client) Connected() bool {
	cn := c.cur.Load()
	return cn != nil && !cn.dead.Load()
}

// Close stops reconnecting, closes the connection and waits for the
// client's goroutines. A concurrent Poll returns transport.ErrClosed.
func (c *Client) Close() error {
	for _, src := range c.sources {
		_ = src.Close()
	}
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	close(c.ep.closing)
	if cn := c.cur.Load(); cn != nil {
		cn.kill(transport.ErrClosed)
	}
	c.mu.Unlock()
	c.ep.close()
	c.wg.Wait()
	return nil
}

// Counters returns the client's totals. FramesSent counts frames accepted
// by Send, including those later dropped while disconnected (in Dropped).
func (c *Client) Counters() transport.Counters {
	t := c.ep.counters()
	for _, src := range c.sources {
		sc := src.ep.counters()
		t.FramesSent += sc.FramesSent
		t.BytesSent += sc.BytesSent
		t.Dropped += sc.Dropped
		t.Refused += sc.Refused
		t.AuthFailed += sc.AuthFailed
	}
	return t
}

// AuthFailures returns the received frames that failed authentication
// (Config.Auth), by the kind their prefix claims (wire.Kind; junk counts
// under 0), its sources' included.
func (c *Client) AuthFailures() [8]uint64 {
	t := c.ep.authFailed.ByKind()
	for _, src := range c.sources {
		for k, n := range src.ep.authFailed.ByKind() {
			t[k] += n
		}
	}
	return t
}

// AddSource makes the repair source at addr (a replayer's or a standby's
// TCP address) reachable by SendTo (transport.Sourcer): the client keeps
// one more connection, to addr, dialled now and again whenever it drops,
// in the background (addr need not be up yet). Frames the source sends
// reach this client's Poll handler with the returned Peer; frames sent to
// it while it is not connected are dropped and counted, as for the
// sequencer. Call it on the endpoint's goroutine.
func (c *Client) AddSource(addr string) (transport.Peer, error) {
	if c.closed.Load() {
		return transport.NoPeer, transport.ErrClosed
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return transport.NoPeer, fmt.Errorf("%w: %q: %v", ErrBadSource, addr, err)
	}
	for i, src := range c.sources {
		if src.addrs[0] == addr {
			return transport.Peer(i + 1), nil
		}
	}
	if len(c.sources) == maxSources {
		return transport.NoPeer, fmt.Errorf("%w: %q: already %d sources", ErrBadSource, addr, maxSources)
	}
	cfg := c.cfg
	cfg.Addr, cfg.Addrs = addr, nil
	// Its frames reach this client's Poll, labelled src.peer.
	src, err := newClient(cfg, transport.Peer(len(c.sources)+1), 2, "source", &c.ep)
	if err != nil {
		return transport.NoPeer, err
	}
	src.at.Store(0)
	c.sources = append(c.sources, src)
	src.wg.Add(1)
	go src.run(nil)
	return src.peer, nil
}

// SendTo queues frame for a source added by AddSource (the Peer it
// returned); other Peers get ErrUnknownPeer.
func (c *Client) SendTo(to transport.Peer, frame []byte) error {
	if c.closed.Load() {
		return transport.ErrClosed
	}
	i := int(to) - 1
	if i < 0 || i >= len(c.sources) {
		return ErrUnknownPeer
	}
	return c.sources[i].Send(frame)
}

// maxSources bounds AddSource.
const maxSources = 64

// Drops counts connections the client closed for cause.
func (c *Client) Drops() Drops { return c.ep.drops() }
