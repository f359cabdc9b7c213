package multicast

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/transporttest"
)

func TestConformance(t *testing.T) {
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("gso,gro=%v", offload), func(t *testing.T) {
			conformance(t, offload)
		})
	}
}

func conformance(t *testing.T, offload bool) {
	transporttest.Run(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		cfg := testConfig(t)
		cfg.GSO, cfg.GRO = offload, offload
		srv, err := NewServer(cfg)
		if err != nil {
			t.Fatalf("NewServer: %v", err)
		}
		cls := make([]transport.Client, n)
		for i := range cls {
			if cls[i], err = NewClient(cfg); err != nil {
				t.Fatalf("NewClient: %v", err)
			}
		}
		return srv, cls, func() {
			srv.Close()
			for _, c := range cls {
				c.Close()
			}
		}
	})
}

func TestConfig_ValidateNamesFieldAndRange(t *testing.T) {
	for _, tc := range []struct {
		edit    func(*Config)
		field   string
		allowed string
	}{
		{func(c *Config) { c.StreamGroup = "1.2.3.4:9" }, "StreamGroup", "multicast address (224.0.0.0/4)"},
		{func(c *Config) { c.CommandGroup = "239.1.1.1" }, "CommandGroup", "IPv4 multicast host:port"},
		{func(c *Config) { c.CommandGroup = "239.1.1.1:0" }, "CommandGroup", "not 0"},
		{func(c *Config) { c.CommandGroup = c.StreamGroup }, "CommandGroup", "distinct from StreamGroup"},
		{func(c *Config) { c.Interface = "" }, "Interface", "interface name"},
		{func(c *Config) { c.TTL = 300 }, "TTL", "0..255"},
		{func(c *Config) { c.BatchSize = 0 }, "BatchSize", "1..1024"},
		{func(c *Config) { c.MaxDatagramBytes = 70000 }, "MaxDatagramBytes", "64..65507"},
		{func(c *Config) { c.ReadBufferBytes = -1 }, "ReadBufferBytes", "0.."},
		{func(c *Config) { c.WriteBufferBytes = 2 << 30 }, "WriteBufferBytes", "0.."},
		{func(c *Config) { c.Faults.Loss = 1 }, "Faults", "loss=1"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		var ce *config.Error
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Allowed, tc.allowed) {
			t.Errorf("Validate() = %v, want a config.Error on %s allowing %q", err, tc.field, tc.allowed)
		}
		if _, err := NewServer(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewServer with bad config = %v, want ErrConfig", err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
	c := DefaultConfig()
	c.Interface = "no-such-if0"
	if _, err := NewClient(c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `Interface "no-such-if0"`) {
		t.Errorf("NewClient on a missing interface = %v", err)
	}
}

func TestGranted_ReportsKernelBuffers(t *testing.T) {
	for _, asked := range []int{256 << 10, 8 << 20} {
		cfg := testConfig(t)
		cfg.ReadBufferBytes, cfg.WriteBufferBytes = asked, asked
		srv, cls := session(t, cfg, 1)
		for _, e := range []*endpoint{&srv.endpoint, &cls[0].endpoint} {
			rcv, snd := e.Granted()
			if rcv <= 0 || snd <= 0 {
				t.Fatalf("%s: Granted() = %d, %d", e.role, rcv, snd)
			}
			info := e.SocketInfo()
			for _, want := range []string{cfg.StreamGroup, cfg.CommandGroup, "interface lo"} {
				if !strings.Contains(info, want) {
					t.Errorf("SocketInfo() = %q, missing %q", info, want)
				}
			}
			// Whether the kernel capped us depends on the host (root may
			// force); the advice must appear exactly when it did.
			capped := rcv < asked
			if got := strings.Contains(info, "raise net.core.rmem_max"); got != capped {
				t.Errorf("%s: granted rcv %d of %d, SocketInfo advice shown=%v: %q", e.role, rcv, asked, got, info)
			}
			t.Logf("%s asked %d: granted rcv %d snd %d", e.role, asked, rcv, snd)
		}
	}
}

func TestErrors_TooLargeAndUnknownPeer(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxDatagramBytes = 1472
	srv, cls := session(t, cfg, 1)
	big := make([]byte, 1473)
	if err := srv.Publish(big); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Errorf("Publish(1473 B) = %v, want ErrFrameTooLarge", err)
	}
	if err := cls[0].Send(big); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Errorf("Send(1473 B) = %v, want ErrFrameTooLarge", err)
	}
	if err := srv.SendTo(7, big[:10]); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("SendTo(unknown) = %v, want ErrUnknownPeer", err)
	}
}

// A burst far larger than one batch, with a reader draining as it comes,
// arrives whole and in order when no faults are injected.
func TestBurst_NoLossInOrder(t *testing.T) {
	const total, burst = 20000, 1000
	srv, cls := session(t, testConfig(t), 2)
	cols := []*collector{{}, {}}
	buf := make([]byte, 256)
	for sent := 0; sent < total; {
		for range burst {
			if err := srv.Publish(indexed(buf, uint64(sent))); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if err := srv.Flush(); err != nil {
			t.Fatal(err)
		}
		for k, cl := range cls {
			pollUntil(t, cl, cols[k], sent)
		}
	}
	for k, c := range cols {
		for i, got := range c.got {
			if got != uint64(i) {
				t.Fatalf("client %d: frame %d is %d (want every frame once, in order)", k, i, got)
			}
		}
		if len(c.got) != total {
			t.Fatalf("client %d: %d frames, want %d", k, len(c.got), total)
		}
	}
	if c := srv.Counters(); c.FramesSent != total || c.BytesSent != total*256 {
		t.Errorf("server counters %+v, want %d frames sent", c, total)
	}
	if c := cls[1].Counters(); c.FramesReceived != total || c.Dropped != 0 {
		t.Errorf("client counters %+v, want %d frames received, 0 dropped", c, total)
	}
}

// With loss injected at the socket edge, the client drops exactly the
// datagrams a reference injector with the same seed and stream drops.
func TestFaults_LossIsSeededAndCounted(t *testing.T) {
	const total, burst = 4000, 500
	faults := fault.Config{Loss: 0.05, Seed: 7}
	ref := fault.New(faults, 9<<2|2) // FaultStream 9, stream socket
	var want []uint64
	for i := range uint64(total) {
		ref.Pass([]byte{0}, func([]byte) { want = append(want, i) })
	}
	run := func() (got []uint64, dropped uint64) {
		cfg := testConfig(t)
		srv, _ := session(t, cfg, 0)
		cfg.Faults, cfg.FaultStream = faults, 9
		cl, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		col := &collector{}
		buf := make([]byte, 200)
		for sent := 0; sent < total; {
			for range burst {
				srv.Publish(indexed(buf, uint64(sent)))
				sent++
			}
			if err := srv.Flush(); err != nil {
				t.Fatal(err)
			}
			// Read until every datagram sent so far is delivered or dropped.
			deadline := 10000
			for uint64(len(col.got))+cl.Counters().Dropped < uint64(sent) && deadline > 0 {
				if _, err := cl.Poll(col.handle, 0); err != nil {
					t.Fatal(err)
				}
				deadline--
			}
			pollUntil(t, cl, col, len(col.got)) // surfaces corruption
		}
		return col.got, cl.Counters().Dropped
	}
	got, dropped := run()
	if dropped != ref.Counters().Dropped || len(got) != len(want) {
		t.Fatalf("dropped %d, delivered %d; reference injector dropped %d, passed %d", dropped, len(got), ref.Counters().Dropped, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delivered[%d] = frame %d, reference says %d", i, got[i], want[i])
		}
	}
	if dropped < total/40 || dropped > total/10 {
		t.Errorf("dropped %d of %d at loss=0.05", dropped, total)
	}
	if got2, dropped2 := run(); dropped2 != dropped || len(got2) != len(got) {
		t.Errorf("second run with the same seed dropped %d, first %d", dropped2, dropped)
	}
}

// A frame held back for reordering is released when the socket goes idle:
// late, never lost.
func TestFaults_ReorderReleasedWhenIdle(t *testing.T) {
	cfg := testConfig(t)
	srv, _ := session(t, cfg, 0)
	cfg.Faults = fault.Config{Reorder: 0.5, Seed: 3}
	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const total = 200
	buf := make([]byte, 64)
	col := &collector{}
	for i := range uint64(total) {
		srv.Publish(indexed(buf, i))
		if err := srv.Flush(); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, cl, col, int(i)+1)
	}
	seen := make([]bool, total)
	reordered := 0
	for k, i := range col.got {
		if seen[i] {
			t.Fatalf("frame %d twice", i)
		}
		seen[i] = true
		if i != uint64(k) {
			reordered++
		}
	}
	if len(col.got) != total {
		t.Fatalf("delivered %d of %d", len(col.got), total)
	}
	t.Logf("%d of %d frames out of place", reordered, total)
}

func TestConformance_Sourcer(t *testing.T) {
	transporttest.RunSourcer(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		cfg := testConfig(t)
		srv, cls := session(t, cfg, n)
		out := make([]transport.Client, n)
		for i, c := range cls {
			out[i] = c
		}
		return srv, out, func() {}
	}, udpEcho)
}

// udpEcho is a repair source on loopback that answers every datagram
// with itself.
func udpEcho(t *testing.T) string {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDP(buf[:n], from)
		}
	}()
	return c.LocalAddr().String()
}
