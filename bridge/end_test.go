package bridge

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

func tcpSite(t *testing.T) transport.Server {
	t.Helper()
	tc := tcp.DefaultConfig()
	tc.Addr = "127.0.0.1:0"
	s, err := tcp.NewServer(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func receiveConfig(t *testing.T, site string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Role, cfg.Site = Receive, site
	cfg.TCP = []string{"127.0.0.1:1"} // nobody: only the UDP channel matters here
	cfg.UDP = []string{"127.0.0.1:0"}
	cfg.Service.Dir = t.TempDir()
	return cfg
}

// A receiving end refuses a stream whose hellos name its own site as
// the origin: a ring of sites must not carry a stream back home.
func TestReceiveEnd_RefusesItsOwnOrigin(t *testing.T) {
	r, err := NewReceiveEnd(receiveConfig(t, "A"), tcpSite(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var h wire.BridgeHelloFrame
	h.Session, h.Tip = 42, 0
	if err := h.SetSite("A"); err != nil {
		t.Fatal(err)
	}
	f, _ := wire.AppendBridgeHello(make([]byte, 0, wire.BridgeHelloBytes), &h)
	to := netip.MustParseAddrPort(r.UDPAddrs()[0])
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if !errors.Is(err, ErrLoop) {
				t.Fatalf("Run returned %v, want ErrLoop", err)
			}
			return
		case <-tick.C:
			if _, err := c.WriteToUDPAddrPort(f, to); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("the receiving end carried a stream of its own site")
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := receiveConfig(t, "B")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"role", func(c *Config) { c.Role = 0 }},
		{"site", func(c *Config) { c.Site = "" }},
		{"origin on a receiving end", func(c *Config) { c.Origin = "A" }},
		{"no tcp on a receiving end", func(c *Config) { c.TCP = nil }},
		{"udp address", func(c *Config) { c.UDP = []string{"nowhere"} }},
		{"dir", func(c *Config) { c.Service.Dir = "" }},
		{"gap timeout", func(c *Config) { c.GapTimeout = 0 }},
		{"faults on", func(c *Config) { c.FaultsOn = "both" }},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// The sending end's forwarding path (each packet the store takes, to
// every UDP flow, from the store's append) allocates nothing per packet.
func TestSendEnd_ForwardAllocatesNothing(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	s := &SendEnd{udp: c, dests: []netip.AddrPort{netip.MustParseAddrPort(sink.LocalAddr().String())}, out: make([]byte, 0, 70000)}
	var pkts [][]byte
	for i := range 8 {
		pkts = append(pkts, build(t, spec{first: uint64(i*3 + 1), count: 3}))
	}
	if n := testing.AllocsPerRun(50, func() {
		for _, p := range pkts {
			s.forwardPacket(p)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per run of 8 packets", n)
	}
	if s.udpPackets.Load() == 0 || s.udpRefused.Load() != 0 {
		t.Fatalf("sent %d, refused %d", s.udpPackets.Load(), s.udpRefused.Load())
	}
}

// The receiving end's path from a chunk to the Service's handler and the
// site (merge, persist, republish) allocates nothing per packet.
func TestReceiveEnd_MergeAndRepublishAllocatesNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxHeldBytes = 1 << 20
	r := &ReceiveEnd{site: tcpSite(t), core: NewReceiveCore(cfg, 2, 0, 1), start: time.Now()}
	r.merge = r.core.Merge()
	r.emitF = r.emit
	handled := 0
	r.handler = func([]byte, transport.Peer) { handled++ }
	r.onPacket = r.packet
	pkts := make([][]byte, 16)
	for i := range pkts {
		pkts[i] = build(t, spec{first: uint64(i + 1), count: 1})
	}
	c := &chunk{b: make([]byte, 0, 1<<16)}
	i := 0
	round := func() {
		c.b = c.b[:0]
		a := pkts[i%16]
		setFirst(a, r.merge.NextSeq())
		i++
		c.put(a)
		c.put(a) // the other channel's copy
		c.each(r.onPacket)
	}
	for range 100 {
		round()
	}
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("%v allocations per packet", n)
	}
	if handled == 0 || r.published.Load() != uint64(handled) {
		t.Fatalf("handled %d, published %d", handled, r.published.Load())
	}
}

// A receiving end whose store says its stream came from its own site
// (a hello named it before a restart) refuses to start.
func TestReceiveEnd_OriginFileOfItsOwnSite(t *testing.T) {
	cfg := receiveConfig(t, "A")
	if err := os.WriteFile(filepath.Join(cfg.Service.Dir, originFile), []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReceiveEnd(cfg, tcpSite(t)); !errors.Is(err, ErrLoop) {
		t.Fatalf("NewReceiveEnd: %v, want ErrLoop", err)
	}
}

// FaultsOn "udp" gives the UDP channels a fault injector and leaves the
// TCP ones healthy (and "tcp" the other way round).
func TestReceiveEnd_FaultsOnChoosesTheChannels(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TCP, cfg.UDP = []string{"127.0.0.1:1"}, []string{"127.0.0.1:2"}
	cfg.Faults.Loss = 0.05
	for _, tc := range []struct {
		on       string
		tcp, udp bool
	}{{"", true, true}, {"all", true, true}, {"udp", false, true}, {"tcp", true, false}} {
		cfg.FaultsOn = tc.on
		r := &ReceiveEnd{cfg: cfg}
		if got := r.inject(0) != nil; got != tc.tcp {
			t.Errorf("FaultsOn %q: tcp channel faulty %v, want %v", tc.on, got, tc.tcp)
		}
		if got := r.inject(1) != nil; got != tc.udp {
			t.Errorf("FaultsOn %q: udp channel faulty %v, want %v", tc.on, got, tc.udp)
		}
	}
}

// A receiving end restarted on a store that holds the stream, with no
// channel bringing anything new (the origin waits for a command of the
// far site that was lost while the end was down), still heartbeats the
// site with the stored tail and stable: the far nodes' resend timers
// run only on what they hear, so without it their lost commands were
// never sent again (the simulator's bridge seed 27 stalled so, with 103
// commands in flight forever).
func TestReceiveEnd_HeartbeatsAfterARestartOnItsStore(t *testing.T) {
	cfg := receiveConfig(t, "B")
	st, _, err := replayer.Open(cfg.Service.Dir, cfg.Service.Store)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []spec{{epoch: 2, first: 1, count: 3}, {epoch: 2, first: 4, count: 2}} {
		if err := st.Append(build(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Service.Dir, originFile), []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	site := tcpSite(t)
	r, err := NewReceiveEnd(cfg, site)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := runEnd(t, ctx, r.Run)
	c := tcpClient(t, site.(*tcp.Server).Addr().String())
	var got wire.Packet
	for ctx.Err() == nil {
		select {
		case err := <-errc:
			t.Fatalf("the receiving end stopped: %v", err)
		default:
		}
		_, _ = c.Poll(func(f []byte, _ transport.Peer) {
			if k, err := wire.PeekKind(f); err == nil && k == wire.KindHeartbeat {
				_ = wire.DecodePacket(f, &got)
			}
		}, 20*time.Millisecond)
		if got.Session != 0 {
			break
		}
	}
	if got.Session != 7 || got.Epoch != 2 || got.Stable != 5 {
		t.Fatalf("heartbeat on the site: session %d epoch %d stable %d, want session 7 epoch 2 stable 5 (none: %v)", got.Session, got.Epoch, got.Stable, got.Session == 0)
	}
}
