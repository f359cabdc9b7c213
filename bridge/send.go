package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// SendStats are a sending end's counters.
type SendStats struct {
	Service    replayer.ServiceStats
	Rewind     replayer.RewindStats // the TCP channels
	UDPPackets uint64               // stream packets sent per UDP flow
	UDPBytes   uint64               // datagram bytes sent, all flows
	UDPRefused uint64               // datagrams the kernel refused (loss)
	Hellos     uint64
	Commands   uint64 // commands received over the link
	Injected   uint64 // commands sent into the site's command group
	Dropped    uint64 // commands dropped (queue full, malformed)
	TLSRefused uint64 // TCP channel connections whose TLS handshake failed
}

// SendEnd is a link's sending end (see the package comment).
type SendEnd struct {
	cfg    Config
	log    *slog.Logger
	svc    *replayer.Service
	follow *injector
	ls     []net.Listener
	udp    *net.UDPConn
	dests  []netip.AddrPort
	hello  wire.BridgeHelloFrame

	// active: the end serves its channels (not a Standby, or
	// activated); activate is closed by Activate.
	active       atomic.Bool
	activate     chan struct{}
	activateOnce sync.Once
	lsMu         sync.Mutex // guards ls and lsClosed once Run may bind them (Activate)
	lsClosed     bool
	takeoverErr  atomic.Pointer[error]

	rewind atomic.Pointer[replayer.RewindServer]
	tip    atomic.Pointer[replayer.Tip]
	out    []byte // the forwarding path's datagram (the Service's goroutine)

	ctlMu     sync.Mutex // guards ctl, ctlClosed
	ctl       map[net.Conn]struct{}
	ctlClosed bool
	ctlWG     sync.WaitGroup

	udpPackets, udpBytes, udpRefused, hellos, commands, dropped atomic.Uint64
	tlsRefused                                                  atomic.Uint64
	stopOnce                                                    sync.Once
}

// NewSendEnd opens the store (cfg.Service.Dir), listens on the TCP
// channel addresses and binds the UDP socket. follow reads the site's
// stream (and carries commands into its command group); nak answers the
// site's NAKs from the store, as a replayer does. The caller closes both
// after Run returns.
func NewSendEnd(cfg Config, follow transport.Client, nak transport.Server) (*SendEnd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Role != Send {
		return nil, fmt.Errorf("%w: Role = %v, want send", ErrConfig, cfg.Role)
	}
	s := &SendEnd{cfg: cfg, log: cfg.logger(), follow: newInjector(follow), out: make([]byte, 0, wire.BridgeHeaderBytes+cfg.MaxPacketBytes),
		ctl: make(map[net.Conn]struct{}), activate: make(chan struct{})}
	if err := s.hello.SetSite(cfg.origin()); err != nil {
		return nil, fmt.Errorf("%w: Origin %q", ErrConfig, cfg.origin())
	}
	for _, a := range cfg.UDP {
		s.dests = append(s.dests, netip.MustParseAddrPort(a))
	}
	fail := func(err error) (*SendEnd, error) {
		s.closeSockets()
		return nil, err
	}
	if !cfg.Standby {
		if err := s.listen(); err != nil {
			return fail(err)
		}
		s.active.Store(true)
		s.activateOnce.Do(func() { close(s.activate) })
	}
	if len(cfg.UDP) > 0 {
		bind := cfg.UDPBind
		if bind == "" {
			bind = ":0"
		}
		la, err := net.ResolveUDPAddr("udp", bind)
		if err != nil {
			return fail(fmt.Errorf("bridge: udp bind %s: %w", bind, err))
		}
		if s.udp, err = net.ListenUDP("udp", la); err != nil {
			return fail(fmt.Errorf("bridge: udp bind %s: %w", bind, err))
		}
		_ = s.udp.SetWriteBuffer(4 << 20)
	}
	sc := cfg.Service
	sc.Logger = s.log
	svc, err := replayer.NewService(sc, s.follow, nak)
	if err != nil {
		return fail(err)
	}
	s.svc = svc
	if s.udp != nil {
		svc.Store().OnAppend(s.forwardPacket)
	}
	return s, nil
}

// listen binds the TCP channels' addresses.
func (s *SendEnd) listen() error {
	s.lsMu.Lock()
	defer s.lsMu.Unlock()
	if s.lsClosed {
		return net.ErrClosed
	}
	for _, a := range s.cfg.TCP {
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, o := range s.ls {
				o.Close()
			}
			s.ls = nil
			return fmt.Errorf("bridge: tcp channel %s: %w", a, err)
		}
		s.ls = append(s.ls, l)
	}
	return nil
}

// Activate makes a Standby end active: from now on it listens on its
// TCP channels and sends on its UDP flows (Run binds the listeners; a
// failure to bind stops Run). Safe from any goroutine; idempotent.
func (s *SendEnd) Activate() {
	s.activateOnce.Do(func() { close(s.activate) })
}

// Active reports whether the end serves its channels.
func (s *SendEnd) Active() bool { return s.active.Load() }

// TCPAddrs are the addresses the TCP channels are served on (a standby
// not yet active: the configured ones).
func (s *SendEnd) TCPAddrs() []string {
	s.lsMu.Lock()
	defer s.lsMu.Unlock()
	if len(s.ls) == 0 {
		return append([]string(nil), s.cfg.TCP...)
	}
	var out []string
	for _, l := range s.ls {
		out = append(out, l.Addr().String())
	}
	return out
}

// UDPAddr is the local address of the UDP flows ("" without).
func (s *SendEnd) UDPAddr() string {
	if s.udp == nil {
		return ""
	}
	return s.udp.LocalAddr().String()
}

// Service is the replayer.Service that follows the site's stream.
func (s *SendEnd) Service() *replayer.Service { return s.svc }

// Stats returns the counters; safe from any goroutine.
func (s *SendEnd) Stats() SendStats {
	st := SendStats{Service: s.svc.Stats(), UDPPackets: s.udpPackets.Load(), UDPBytes: s.udpBytes.Load(),
		UDPRefused: s.udpRefused.Load(), Hellos: s.hellos.Load(), Commands: s.commands.Load(),
		Injected: s.follow.sent.Load(), Dropped: s.dropped.Load() + s.follow.dropped.Load(), TLSRefused: s.tlsRefused.Load()}
	if r := s.rewind.Load(); r != nil {
		st.Rewind = r.Stats()
	}
	return st
}

func (s *SendEnd) closeSockets() {
	s.stopOnce.Do(func() {
		s.lsMu.Lock()
		for _, l := range s.ls {
			l.Close()
		}
		s.lsClosed = true
		s.lsMu.Unlock()
		if s.udp != nil {
			s.udp.Close()
		}
	})
}

// Run follows the stream and serves the channels until ctx ends (it
// returns ctx's error) or the Service stops on a fatal error.
func (s *SendEnd) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	svcErr := make(chan error, 1)
	go func() { svcErr <- s.svc.Run(ctx) }()
	var tip *replayer.Tip
	if err := s.svc.Do(ctx, func(st *replayer.Store) { tip = st.Tip() }); err != nil {
		cancel()
		return errors.Join(err, <-svcErr)
	}
	rs, err := replayer.NewRewindServer(tip, s.cfg.Rewind)
	if err != nil {
		cancel()
		<-svcErr
		return err
	}
	s.rewind.Store(rs)
	s.tip.Store(tip)
	var wg sync.WaitGroup
	serve := func() {
		s.lsMu.Lock()
		ls := append([]net.Listener(nil), s.ls...)
		s.lsMu.Unlock()
		for _, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The control connections share the channel's address.
				d := newDemux(l, s.cfg.channelServerTLS(), s.log, &s.tlsRefused, s.cfg.Rewind.RequestTimeout, func(c net.Conn) { go s.serveControl(ctx, c) })
				if err := rs.Serve(d); err != nil && ctx.Err() == nil {
					s.log.Error("bridge: tcp channel stopped", "addr", l.Addr().String(), "err", err)
				}
			}()
		}
		if s.udp != nil {
			wg.Add(2)
			go func() { defer wg.Done(); s.sayHello(ctx, tip) }()
			go func() { defer wg.Done(); s.commandsIn() }()
		}
	}
	if s.active.Load() {
		serve()
		s.log.Info("bridge: sending", "site", s.cfg.Site, "origin", s.cfg.origin(), "tcp", s.TCPAddrs(), "udp", s.cfg.UDP, "udp_local", s.UDPAddr())
	} else {
		s.log.Info("bridge: standby (following the stream into the store; channels off until activated)", "site", s.cfg.Site, "origin", s.cfg.origin())
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-s.activate:
			}
			if err := s.listen(); err != nil {
				if ctx.Err() == nil {
					err = fmt.Errorf("bridge: the standby cannot take over: %w", err)
					s.takeoverErr.Store(&err)
					cancel()
				}
				return
			}
			s.active.Store(true)
			serve()
			s.log.Warn("bridge: standby ACTIVE: serving the channels", "site", s.cfg.Site, "tcp", s.TCPAddrs(), "udp", s.cfg.UDP, "tip", tip.Seq())
		}()
	}
	err = <-svcErr
	cancel()
	rs.Close()
	s.closeSockets()
	s.closeControl()
	wg.Wait()
	if e := s.takeoverErr.Load(); e != nil {
		return *e
	}
	return err
}

// sayHello is the UDP channels' goroutine: a hello on every flow each
// HelloInterval. The stream itself goes out from the Service's goroutine
// (forwardPacket), so it waits for no wake-up of this one.
//
// Until the session is known it also waits on the tip, so the first
// hello goes out as soon as the store takes the stream's first packet,
// not up to a HelloInterval later: the far end learns the origin (and
// can refuse a loop, or answer its site's NAKs) one interval sooner.
func (s *SendEnd) sayHello(ctx context.Context, tip *replayer.Tip) {
	t := time.NewTicker(s.cfg.HelloInterval)
	defer t.Stop()
	wake, stop := tip.Wake()
	defer func() { stop() }()
	hb := make([]byte, 0, wire.BridgeHelloBytes)
	for {
		if tip.Session() != 0 {
			s.hello.Session, s.hello.Tip = tip.Session(), tip.Seq()
			if f, err := wire.AppendBridgeHello(hb, &s.hello); err == nil {
				s.send(f)
				s.hellos.Add(1)
			}
			if wake != nil { // the session is known: the ticker alone paces hellos
				stop()
				wake, stop = nil, func() {}
			}
		}
		select {
		case <-t.C:
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// forwardPacket sends a packet the store just took to every flow, on the
// Service's goroutine (Store.OnAppend), before it reaches the store's
// file: the far end hears it one wake-up sooner than from a Reader at
// the tip. It allocates nothing.
func (s *SendEnd) forwardPacket(pkt []byte) {
	f, err := DataFrame(s.out, pkt)
	if err != nil {
		s.dropped.Add(1) // too large for a datagram: the TCP channels carry it
		return
	}
	s.send(f)
	s.udpPackets.Add(1)
}

func (s *SendEnd) send(f []byte) {
	if !s.active.Load() {
		return // a standby sends nothing
	}
	for _, d := range s.dests {
		if _, err := s.udp.WriteToUDPAddrPort(f, d); err != nil {
			s.udpRefused.Add(1) // loss: the TCP channel carries it
			continue
		}
		s.udpBytes.Add(uint64(len(f)))
	}
}

// commandsIn reads the commands the receiving end sends back on the UDP
// flows and queues them for the site's command group.
func (s *SendEnd) commandsIn() {
	buf := make([]byte, 65536)
	for {
		n, _, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a refused datagram (ICMP) is loss
		}
		body, ok := CommandOf(buf[:n])
		if !ok {
			s.dropped.Add(1)
			continue
		}
		s.commands.Add(1)
		s.follow.push(body)
	}
}
