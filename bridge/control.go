package bridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seqd/seqd/internal/logging"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/wire"
)

// A TCP channel's control connection (docs/bridge.md, wire/bridge.go):
// a receiving end dials each TCP channel's address a second time and
// opens with a record; the sending end tells it from a rewind request by
// its first two bytes ("SB", not "SQ") and sends hellos on it (the
// origin's identity: the loop check needs no UDP channel) and takes the
// far site's commands from it (when the link has no UDP channel, or none
// of its UDP channels has heard a hello lately).

const (
	// maxControlConns bounds a sending end's control connections.
	maxControlConns = 16
	// maxSorting bounds the connections a sending end's listener is
	// still telling apart (each at most Rewind.RequestTimeout).
	maxSorting = 64
	// controlQueue bounds the commands a control connection holds not
	// yet written; beyond it a command is dropped (its node resends).
	controlQueue = 256
)

// demux is a TCP channel's listener as the rewind server sees it: the
// connections that open with a bridge record go to control instead.
type demux struct {
	l   net.Listener
	tls *tls.Config // nil: plain TCP (the first bytes peeked in the socket)
	log *slog.Logger
	// refused counts the TLS handshakes refused (SendStats.TLSRefused);
	// lim bounds their log lines: a scanner must not flood the log.
	refused *atomic.Uint64
	lim     *logging.Limiter
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	sorting chan struct{} // a token per connection being told apart
	timeout time.Duration
	control func(net.Conn)
}

func newDemux(l net.Listener, tc *tls.Config, log *slog.Logger, refused *atomic.Uint64, timeout time.Duration, control func(net.Conn)) *demux {
	d := &demux{l: l, tls: tc, log: log, refused: refused, lim: logging.NewLimiter(10*time.Second, nil), conns: make(chan net.Conn), done: make(chan struct{}), sorting: make(chan struct{}, maxSorting),
		timeout: timeout, control: control}
	go d.run()
	return d
}

func (d *demux) Accept() (net.Conn, error) {
	select {
	case c := <-d.conns:
		return c, nil
	case <-d.done:
		return nil, net.ErrClosed
	}
}

func (d *demux) Close() error {
	d.once.Do(func() { close(d.done) })
	return d.l.Close()
}

func (d *demux) Addr() net.Addr { return d.l.Addr() }

func (d *demux) run() {
	for {
		c, err := d.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			d.Close()
			return
		}
		select {
		case d.sorting <- struct{}{}:
			go d.sort(c)
		default:
			c.Close() // too many that have not said what they are
		}
	}
}

// sort peeks at the first two bytes of c, leaving them unread, and
// hands c to the rewind server or to control.
func (d *demux) sort(c net.Conn) {
	defer func() { <-d.sorting }()
	var (
		magic [2]byte
		err   error
	)
	if d.tls != nil {
		c, magic, err = d.handshake(c)
	} else {
		magic, err = peek2(c, time.Now().Add(d.timeout))
	}
	if err != nil {
		c.Close()
		return
	}
	if d.tls == nil {
		_ = c.SetReadDeadline(time.Time{})
	}
	if magic == [2]byte{byte(wire.BridgeMagic & 0xff), byte(wire.BridgeMagic >> 8)} {
		d.control(c)
		return
	}
	select {
	case d.conns <- c:
	case <-d.done:
		c.Close()
	}
}

// handshake is sort's TLS path: the handshake and the first two bytes
// within the timeout; the connection handed on gives those bytes back
// first (TLS records cannot be peeked in the socket).
func (d *demux) handshake(raw net.Conn) (net.Conn, [2]byte, error) {
	var b [2]byte
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		_ = tc.SetWriteBuffer(4 << 20)
	}
	c := tls.Server(raw, d.tls)
	_ = c.SetDeadline(time.Now().Add(d.timeout))
	if err := c.Handshake(); err != nil {
		d.refused.Add(1)
		if ok, n := d.lim.Allow("handshake"); ok {
			d.log.Warn("bridge: tcp channel: tls handshake refused", "remote", raw.RemoteAddr().String(),
				"err", tlsconf.Explain(raw.RemoteAddr().String(), err), "refused_total", d.refused.Load(), "not_logged", n)
		}
		return c, b, err
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return c, b, err
	}
	_ = c.SetDeadline(time.Time{})
	return &prefixConn{Conn: c, pre: b[:]}, b, nil
}

// prefixConn gives back bytes already read from its Conn before the rest.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// peek2 reads c's first two bytes without taking them (MSG_PEEK), so
// that the rewind server gets the connection whole, a *net.TCPConn.
func peek2(c net.Conn, deadline time.Time) ([2]byte, error) {
	var b [2]byte
	sc, ok := c.(syscall.Conn)
	if !ok {
		return b, errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return b, err
	}
	_ = c.SetReadDeadline(deadline)
	for {
		var n int
		var perr error
		err = rc.Read(func(fd uintptr) bool {
			n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
			return !errors.Is(perr, syscall.EAGAIN)
		})
		switch {
		case err != nil:
			return b, err
		case perr != nil:
			return b, perr
		case n == 0:
			return b, io.EOF
		case n == 2:
			return b, nil
		}
		// One byte so far: it is readable, so wait a moment for the next.
		if time.Now().After(deadline) {
			return b, context.DeadlineExceeded
		}
		time.Sleep(time.Millisecond)
	}
}

// serveControl is a sending end's side of one control connection: hellos
// every HelloInterval, commands read into the site's command group.
func (s *SendEnd) serveControl(ctx context.Context, c net.Conn) {
	s.ctlMu.Lock()
	if s.ctlClosed || len(s.ctl) >= maxControlConns {
		s.ctlMu.Unlock()
		c.Close()
		return
	}
	s.ctl[c] = struct{}{}
	s.ctlWG.Add(1)
	s.ctlMu.Unlock()
	defer func() {
		c.Close()
		s.ctlMu.Lock()
		delete(s.ctl, c)
		s.ctlMu.Unlock()
		s.ctlWG.Done()
	}()
	read := make(chan struct{})
	go func() {
		defer close(read)
		s.readCommands(c)
	}()
	tip := s.tip.Load()
	var h wire.BridgeHelloFrame
	h.Origin, h.OriginLen = s.hello.Origin, s.hello.OriginLen
	hb := make([]byte, 0, wire.BridgeHelloBytes)
	rec := make([]byte, 0, wire.BridgeRecordHeaderBytes+wire.BridgeHelloBytes)
	t := time.NewTicker(s.cfg.HelloInterval)
	defer t.Stop()
	// Until the session is known, the tip's first move wakes the loop
	// too (as sayHello does): the first hello is not a HelloInterval late.
	var wake <-chan struct{}
	stop := func() {}
	if tip != nil {
		wake, stop = tip.Wake()
	}
	defer func() { stop() }()
	for {
		if tip != nil && tip.Session() != 0 {
			h.Session, h.Tip = tip.Session(), tip.Seq()
			f, err := wire.AppendBridgeHello(hb, &h)
			if err == nil {
				rec, _ = wire.AppendBridgeRecord(rec[:0], wire.BridgeHello, f[wire.BridgeHeaderBytes:])
				_ = c.SetWriteDeadline(time.Now().Add(10 * s.cfg.HelloInterval))
				if _, err := c.Write(rec); err != nil {
					return
				}
				s.hellos.Add(1)
			}
			if wake != nil {
				stop()
				wake, stop = nil, func() {}
			}
		}
		select {
		case <-t.C:
		case <-wake:
		case <-read:
			return
		case <-ctx.Done():
			return
		}
	}
}

// readCommands reads a control connection's records until it ends:
// commands go to the site's command group; the receiving end's hellos
// are read past.
func (s *SendEnd) readCommands(c net.Conn) {
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [wire.BridgeRecordHeaderBytes]byte
	body := make([]byte, wire.MaxBridgeRecordBody)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		k, n, err := wire.DecodeBridgeRecordHeader(hdr[:])
		if err != nil {
			s.dropped.Add(1)
			return // not a control connection's bytes: end it
		}
		if _, err := io.ReadFull(br, body[:n]); err != nil {
			return
		}
		if k != wire.BridgeCommand {
			continue
		}
		if pk, err := wire.PeekKind(body[:n]); err != nil || pk != wire.KindCommand {
			s.dropped.Add(1)
			continue
		}
		s.commands.Add(1)
		s.follow.push(body[:n])
	}
}

// closeControl ends every control connection and waits for them.
func (s *SendEnd) closeControl() {
	s.ctlMu.Lock()
	s.ctlClosed = true
	for c := range s.ctl {
		c.Close()
	}
	s.ctlMu.Unlock()
	s.ctlWG.Wait()
}

// control is a receiving end's control connection to one TCP channel's
// address: its goroutine dials, reads the hellos, and writes the queued
// commands.
type control struct {
	mu   sync.Mutex // guards q, n, up
	q    [controlQueue][]byte
	n    int
	up   bool // connected: commands are queued only then
	wake chan struct{}
}

func newControl() *control { return &control{wake: make(chan struct{}, 1)} }

// push queues a copy of a command record; false when not connected or
// full. The Service's goroutine; it allocates nothing once the queue's
// buffers have grown.
func (c *control) push(cmd []byte) bool {
	c.mu.Lock()
	if !c.up || c.n == len(c.q) {
		c.mu.Unlock()
		return false
	}
	var err error
	if c.q[c.n], err = wire.AppendBridgeRecord(c.q[c.n][:0], wire.BridgeCommand, cmd); err != nil {
		c.mu.Unlock()
		return false
	}
	c.n++
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

func (c *control) setUp(up bool) {
	c.mu.Lock()
	c.up, c.n = up, 0
	c.mu.Unlock()
}

// controlChannel keeps the control connection to addr (TCP channel ch)
// until ctx ends, dialling again after a cut.
func (r *ReceiveEnd) controlChannel(ctx context.Context, ch int, addr string, c *control) {
	nd := &net.Dialer{Timeout: r.cfg.Upstream.DialTimeout}
	dial := nd.DialContext
	if tc := r.cfg.channelClientTLS(); tc != nil {
		dial = (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext
	}
	idle := 0
	said := ""
	for ctx.Err() == nil {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil && r.cfg.TLS != nil && ctx.Err() == nil {
			// A refused certificate does not mend by itself: say why,
			// once per reason.
			if why := tlsconf.Explain(addr, err).Error(); why != said {
				said = why
				r.log.Warn("bridge: control channel", "addr", addr, "err", why)
			}
		}
		if err == nil {
			if r.controlConn(ctx, ch, conn, c) {
				idle = 0
			}
			conn.Close()
		}
		idle++
		select {
		case <-ctx.Done():
		case <-time.After(min(r.cfg.Upstream.RetryMax, 20*time.Millisecond<<min(idle, 6))):
		}
	}
}

// controlConn runs one control connection; true if a hello came on it.
func (r *ReceiveEnd) controlConn(ctx context.Context, ch int, conn net.Conn, c *control) bool {
	// The opening record: a hello naming this end's site (the sending
	// end tells the connection from a rewind by it).
	var h wire.BridgeHelloFrame
	_ = h.SetSite(r.cfg.Site)
	f, _ := wire.AppendBridgeHello(make([]byte, 0, wire.BridgeHelloBytes), &h)
	open, _ := wire.AppendBridgeRecord(nil, wire.BridgeHello, f[wire.BridgeHeaderBytes:])
	_ = conn.SetWriteDeadline(time.Now().Add(r.cfg.Upstream.DialTimeout))
	if _, err := conn.Write(open); err != nil {
		return false
	}
	c.setUp(true)
	defer c.setUp(false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.writeControl(conn, c, stop) }()
	defer func() { close(stop); conn.Close(); wg.Wait() }()
	go func() {
		select {
		case <-ctx.Done():
			conn.Close()
		case <-stop:
		}
	}()
	br := bufio.NewReader(conn)
	var hdr [wire.BridgeRecordHeaderBytes]byte
	body := make([]byte, wire.MaxBridgeRecordBody)
	heard := false
	for {
		// A sending end sends a hello every HelloInterval: one silent
		// for ten is gone (or cut off); dial again.
		_ = conn.SetReadDeadline(time.Now().Add(10 * r.cfg.HelloInterval))
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return heard
		}
		k, n, err := wire.DecodeBridgeRecordHeader(hdr[:])
		if err != nil {
			return heard
		}
		if _, err := io.ReadFull(br, body[:n]); err != nil {
			return heard
		}
		if k != wire.BridgeHello {
			continue
		}
		var hello wire.BridgeHelloFrame
		if wire.DecodeBridgeHello(body[:n], &hello) != nil {
			return heard
		}
		heard = true
		if !r.hello(ch, &hello) {
			return heard
		}
	}
}

// writeControl writes the queued commands until stop.
func (r *ReceiveEnd) writeControl(conn net.Conn, c *control, stop <-chan struct{}) {
	var out [controlQueue][]byte
	for {
		select {
		case <-stop:
			return
		case <-c.wake:
		}
		c.mu.Lock()
		n := c.n
		for i := 0; i < n; i++ {
			out[i] = append(out[i][:0], c.q[i]...)
		}
		c.n = 0
		c.mu.Unlock()
		for i := 0; i < n; i++ {
			_ = conn.SetWriteDeadline(time.Now().Add(r.cfg.Upstream.DialTimeout))
			if _, err := conn.Write(out[i]); err != nil {
				conn.Close() // the reader ends too; dialled again
				return
			}
		}
	}
}
