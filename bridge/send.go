package bridge

import (
	"context"
	"encoding/binary"
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

	rewind atomic.Pointer[replayer.RewindServer]
	out    []byte // the forwarding path's datagram (flow goroutine)

	udpPackets, udpBytes, udpRefused, hellos, commands, dropped atomic.Uint64
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
	s := &SendEnd{cfg: cfg, log: cfg.logger(), follow: newInjector(follow), out: make([]byte, 0, wire.BridgeHeaderBytes+cfg.MaxPacketBytes)}
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
	for _, a := range cfg.TCP {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return fail(fmt.Errorf("bridge: tcp channel %s: %w", a, err))
		}
		s.ls = append(s.ls, l)
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
	return s, nil
}

// TCPAddrs are the addresses the TCP channels are served on.
func (s *SendEnd) TCPAddrs() []string {
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
		Injected: s.follow.sent.Load(), Dropped: s.dropped.Load() + s.follow.dropped.Load()}
	if r := s.rewind.Load(); r != nil {
		st.Rewind = r.Stats()
	}
	return st
}

func (s *SendEnd) closeSockets() {
	s.stopOnce.Do(func() {
		for _, l := range s.ls {
			l.Close()
		}
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
	var wg sync.WaitGroup
	for _, l := range s.ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rs.Serve(l); err != nil && ctx.Err() == nil {
				s.log.Error("bridge: tcp channel stopped", "addr", l.Addr().String(), "err", err)
			}
		}()
	}
	if s.udp != nil {
		wg.Add(2)
		go func() { defer wg.Done(); s.flows(ctx, tip) }()
		go func() { defer wg.Done(); s.commandsIn() }()
	}
	s.log.Info("bridge: sending", "site", s.cfg.Site, "origin", s.cfg.origin(), "tcp", s.TCPAddrs(), "udp", s.cfg.UDP, "udp_local", s.UDPAddr())
	err = <-svcErr
	cancel()
	rs.Close()
	s.closeSockets()
	wg.Wait()
	return err
}

// flows is the UDP channels' goroutine: a Reader at the store's tip,
// each stored packet in one datagram to every far address, and a hello
// every HelloInterval.
func (s *SendEnd) flows(ctx context.Context, tip *replayer.Tip) {
	r := replayer.NewReader(tip, tip.Seq()+1, 0)
	defer func() { r.Close() }()
	t := time.NewTimer(time.Hour)
	t.Stop()
	var lastHello time.Time
	hb := make([]byte, 0, wire.BridgeHelloBytes)
	for ctx.Err() == nil {
		if time.Since(lastHello) >= s.cfg.HelloInterval && tip.Session() != 0 {
			lastHello = time.Now()
			s.hello.Session, s.hello.Tip = tip.Session(), tip.Seq()
			if f, err := wire.AppendBridgeHello(hb, &s.hello); err == nil {
				s.send(f)
				s.hellos.Add(1)
			}
		}
		run, err := r.Next()
		if err != nil {
			if tip.Closed() || ctx.Err() != nil {
				return
			}
			// A store the Reader cannot follow (a segment gone under
			// it): start again at the tip; the TCP channels still carry
			// everything.
			s.log.Warn("bridge: udp flows: reader stopped; restarting at the tip", "err", err)
			r.Close()
			time.Sleep(100 * time.Millisecond)
			r = replayer.NewReader(tip, tip.Seq()+1, 0)
			continue
		}
		if len(run) == 0 {
			// The Service's next turn (its appends are in the files by
			// then), or TipPollMax at the latest.
			t.Reset(s.cfg.Rewind.TipPollMax)
			select {
			case <-s.follow.turn:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		s.forward(run)
	}
}

// forward sends every stored packet of run (the store's frame layout:
// crc, length, firstSeq, packet) to every flow. It allocates nothing.
func (s *SendEnd) forward(run []byte) {
	for len(run) >= replayer.FrameHeaderBytes {
		n := replayer.FrameHeaderBytes + int(binary.LittleEndian.Uint32(run[4:]))
		if n > len(run) {
			return
		}
		f, err := DataFrame(s.out, run[replayer.FrameHeaderBytes:n])
		run = run[n:]
		if err != nil {
			s.dropped.Add(1)
			continue
		}
		s.send(f)
		s.udpPackets.Add(1)
	}
}

func (s *SendEnd) send(f []byte) {
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
