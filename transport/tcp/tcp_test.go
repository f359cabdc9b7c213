package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/transporttest"
)

// liveness bounds waits for things that must happen; reaching it is a
// failure, never a measure of speed.
const liveness = 10 * time.Second

// logBuffer collects log output from the connection goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testConfig(t *testing.T) (Config, *logBuffer) {
	logs := &logBuffer{}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.ReconnectMin = time.Millisecond
	cfg.ReconnectMax = 20 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transport log:\n%s", logs)
		}
	})
	return cfg, logs
}

// benchConfig is the configuration of the benchmarks: the defaults, on
// loopback.
func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	return cfg
}

func newServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t testing.TB, cfg Config, s *Server) *Client {
	t.Helper()
	cfg.Addr = s.Addr().String()
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls p until cond holds, failing after liveness.
func eventually(t testing.TB, what string, p interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, h transport.Handler, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !cond() {
		if _, err := p.Poll(h, time.Millisecond); err != nil {
			t.Fatalf("%s: Poll: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, liveness)
		}
	}
}

// waitClients waits until s has accepted n connections, so that Publish
// reaches them all.
func waitClients(t testing.TB, s *Server, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d clients connected", n), s, ignore, func() bool { return s.Clients() == n })
}

func ignore([]byte, transport.Peer) {}

func TestConformance(t *testing.T) {
	transporttest.Run(t, conformanceSession(func(_ *testing.T, cfg *Config, server string) {
		cfg.Addr = server
	}))
}

// conformanceSession makes the conformance suites' sessions: a server and
// n clients, dialled with cfg as addrs sets it to reach the server,
// closed by the returned func.
func conformanceSession(addrs func(t *testing.T, cfg *Config, server string)) func(*testing.T, int) (transport.Server, []transport.Client, func()) {
	return func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		cfg, _ := testConfig(t)
		s, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		addrs(t, &cfg, s.Addr().String())
		cls := make([]transport.Client, n)
		closers := []func() error{s.Close}
		for i := range cls {
			c, err := Dial(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cls[i] = c
			closers = append(closers, c.Close)
		}
		waitClients(t, s, n)
		return s, cls, func() {
			for _, c := range closers {
				c()
			}
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Addr", func(c *Config) { c.Addr = "nohostport" }},
		{"MaxFrameBytes", func(c *Config) { c.MaxFrameBytes = 1472 }},
		{"ReadBufferBytes", func(c *Config) { c.ReadBufferBytes = 10 }},
		{"WriteBufferBytes", func(c *Config) { c.WriteBufferBytes = 0 }},
		{"InboxBytes", func(c *Config) { c.InboxBytes = c.MaxFrameBytes }},
		{"SlowClientBytes", func(c *Config) { c.SlowClientBytes = c.MaxFrameBytes }},
		{"DialTimeout", func(c *Config) { c.DialTimeout = 0 }},
		{"ReconnectMin", func(c *Config) { c.ReconnectMin = -1 }},
		{"ReconnectMax", func(c *Config) { c.ReconnectMax = c.ReconnectMin / 2 }},
		{"Faults", func(c *Config) { c.Faults.Loss = 1 }},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		var ce *config.Error
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want ErrConfig naming %s", tc.field, err, tc.field)
		}
		if _, err := NewServer(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewServer = %v, want ErrConfig", tc.field, err)
		}
	}
}

func TestDial_NoServer(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	addr := s.Addr().String()
	s.Close()
	cfg.Addr = addr
	if c, err := Dial(cfg); err == nil {
		c.Close()
		t.Fatalf("Dial(%s) with no server succeeded", addr)
	} else if !strings.Contains(err.Error(), "tcp: dial "+addr) {
		t.Fatalf("Dial error %q does not name the address", err)
	}
}

// recorder keeps copies of the frames it is handed.
type recorder struct {
	frames [][]byte
	from   []transport.Peer
}

func (r *recorder) handle(frame []byte, from transport.Peer) {
	r.frames = append(r.frames, bytes.Clone(frame))
	r.from = append(r.from, from)
}

func numbered(i, size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, uint32(i))
	for j := 4; j < size; j++ {
		b[j] = byte(i + j)
	}
	return b
}

// The inbox ring wraps many times with frames of many sizes; every frame
// arrives intact and in order.
func TestServer_ManyFramesThroughSmallInbox(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.MaxFrameBytes = MinMaxFrameBytes
	cfg.InboxBytes = cfg.minInboxBytes() + 1000
	cfg.ReadBufferBytes = minBufferBytes
	// The sender runs far ahead of the tiny inbox on purpose: it must
	// not be cut off as a slow peer.
	cfg.MaxQueueBytes = 256 << 20
	cfg.SlowClientTimeout = time.Minute // the server stalls it on purpose
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	const frames = 3000
	sent := make([][]byte, frames)
	for i := range sent {
		sent[i] = numbered(i, 4+(i*7919)%(MinMaxFrameBytes-4))
		if i%50 == 0 {
			sent[i] = numbered(i, MinMaxFrameBytes)
		}
	}
	go func() {
		for i, f := range sent {
			if c.Send(f) != nil {
				return
			}
			if i%10 == 9 {
				c.Flush()
			}
		}
		c.Flush()
	}()
	var r recorder
	eventually(t, "all frames received", s, r.handle, func() bool { return len(r.frames) == frames })
	for i := range sent {
		if !bytes.Equal(r.frames[i], sent[i]) {
			t.Fatalf("frame %d: got %d bytes starting %x, want %d bytes starting %x", i, len(r.frames[i]), r.frames[i][:4], len(sent[i]), sent[i][:4])
		}
	}
}

func TestServer_DisconnectedClientReconnectsAndResumes(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	peers := s.Peers(nil)
	if !s.Disconnect(peers[0]) {
		t.Fatalf("Disconnect(%d) found no connection", peers[0])
	}
	if s.Disconnect(peers[0]) {
		t.Fatal("second Disconnect found the connection again")
	}
	eventually(t, "client reconnected", c, ignore, func() bool { return c.Reconnects() == 1 && c.Connected() })
	waitClients(t, s, 1)
	if now := s.Peers(nil); now[0] == peers[0] {
		t.Fatalf("reconnected client kept Peer %d", now[0])
	}
	if err := s.Publish([]byte("after reconnect")); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	var r recorder
	eventually(t, "frame after reconnect", c, r.handle, func() bool { return len(r.frames) > 0 })
	if string(r.frames[0]) != "after reconnect" {
		t.Fatalf("got %q", r.frames[0])
	}
}

// The sequencer restarts on the same address: the client finds it again.
func TestClient_ReconnectsToRestartedServer(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	cfg.Addr = s.Addr().String()
	s.Close()
	eventually(t, "client saw the drop", c, ignore, func() bool { return !c.Connected() })
	// Sent while disconnected: dropped, counted, not an error.
	if err := c.Send([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := c.Counters().Dropped; d != 1 {
		t.Fatalf("Dropped = %d after a flush while disconnected, want 1", d)
	}
	s2 := newServer(t, cfg)
	eventually(t, "client reconnected", c, ignore, func() bool { return c.Connected() })
	if c.Reconnects() != 1 {
		t.Fatalf("Reconnects = %d, want 1", c.Reconnects())
	}
	c.Send([]byte("hello again"))
	c.Flush()
	var r recorder
	eventually(t, "command after reconnect", s2, r.handle, func() bool { return len(r.frames) > 0 })
	if string(r.frames[0]) != "hello again" || r.from[0] == transport.NoPeer {
		t.Fatalf("got %q from %d", r.frames[0], r.from[0])
	}
}

func TestServer_SlowClientDisconnected(t *testing.T) {
	cfg, logs := testConfig(t)
	cfg.MaxFrameBytes = MinMaxFrameBytes
	cfg.SlowClientBytes = 256 << 10
	cfg.InboxBytes = cfg.minInboxBytes()
	s := newServer(t, cfg)
	slow := dial(t, cfg, s)
	waitClients(t, s, 1)
	// The client does not poll: its inbox fills, its reader stops, the
	// socket buffers fill, the server's writer blocks and its queue grows.
	frame := make([]byte, 16<<10)
	for i := 0; s.Drops().SlowClients == 0; i++ {
		if i == 1<<16 { // 1 GiB published: the bound is not enforced
			t.Fatalf("no slow-client disconnect after %d frames", i)
		}
		s.Publish(frame)
		s.Flush()
	}
	if d := s.Drops(); d.SlowClients != 1 || d.OversizedFrames != 0 {
		t.Fatalf("Drops = %+v", d)
	}
	if !strings.Contains(logs.String(), ErrSlowClient.Error()) {
		t.Fatalf("log does not give the reason %q:\n%s", ErrSlowClient, logs)
	}
	// Once it polls again it finds the connection gone and comes back.
	eventually(t, "slow client reconnected", slow, ignore, func() bool { return slow.Reconnects() == 1 && slow.Connected() })
	waitClients(t, s, 1)
	s.Publish([]byte("welcome back"))
	s.Flush()
	var r recorder
	eventually(t, "frame after reconnect", slow, r.handle, func() bool {
		return len(r.frames) > 0 && string(r.frames[len(r.frames)-1]) == "welcome back"
	})
}

func TestServer_OversizedFrameClosesConnection(t *testing.T) {
	cfg, logs := testConfig(t)
	s := newServer(t, cfg)
	good := dial(t, cfg, s)
	raw, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	waitClients(t, s, 2)
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(cfg.MaxFrameBytes+1))
	raw.Write(hdr[:])
	eventually(t, "oversized frame counted", s, ignore, func() bool { return s.Drops().OversizedFrames == 1 })
	raw.SetReadDeadline(time.Now().Add(liveness))
	if _, err := raw.Read(hdr[:]); err == nil {
		t.Fatal("the connection that sent an oversized frame is still open")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection that sent an oversized frame was not closed")
	}
	// The counter rises before the connection's goroutine logs.
	eventually(t, "reason logged", s, ignore, func() bool { return strings.Contains(logs.String(), ErrOversizedFrame.Error()) })
	// The other client is not affected.
	good.Send([]byte("still here"))
	good.Flush()
	var r recorder
	eventually(t, "frame from the good client", s, r.handle, func() bool { return len(r.frames) == 1 })
	if string(r.frames[0]) != "still here" {
		t.Fatalf("got %q", r.frames[0])
	}
	if err := s.Publish(make([]byte, cfg.MaxFrameBytes+1)); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("Publish of MaxFrameBytes+1 = %v, want ErrFrameTooLarge", err)
	}
}

// With loss=0.2 about a fifth of the frames are not delivered, and the same
// seed drops the same frames.
func TestServer_FaultsDropSeededFraction(t *testing.T) {
	run := func() []int {
		cfg, _ := testConfig(t)
		cfg.Faults = fault.Config{Loss: 0.2, Seed: 7}
		s := newServer(t, cfg)
		cfg.Faults = fault.Config{}
		c := dial(t, cfg, s)
		const frames = 5000
		for i := range frames {
			c.Send(numbered(i, 8))
		}
		c.Flush()
		var got []int
		eventually(t, "every frame delivered or dropped", s, func(f []byte, _ transport.Peer) {
			got = append(got, int(binary.LittleEndian.Uint32(f)))
		}, func() bool {
			n := s.Counters()
			return n.FramesReceived+n.Dropped == frames
		})
		if n := s.Counters(); n.Dropped != uint64(frames-len(got)) {
			t.Fatalf("Dropped = %d, but %d of %d frames did not arrive", n.Dropped, frames-len(got), frames)
		}
		return got
	}
	a, b := run(), run()
	lost := 5000 - len(a)
	if lost < 800 || lost > 1200 {
		t.Fatalf("lost %d of 5000 frames at loss=0.2", lost)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same seed delivered different frames")
	}
	for i := 1; i < len(a); i++ {
		if a[i] <= a[i-1] {
			t.Fatalf("frames out of order: %d after %d", a[i], a[i-1])
		}
	}
}

func TestClient_CloseUnblocksPollAndStopsReconnecting(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	s.Close() // the client now tries to reconnect, in vain
	errc := make(chan error, 1)
	go func() {
		_, err := c.Poll(ignore, time.Hour)
		errc <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Poll = %v, want ErrClosed", err)
		}
	case <-time.After(liveness):
		t.Fatal("Poll still blocked after Close")
	}
	if err := c.Send([]byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
}

func TestConformance_Sourcer(t *testing.T) {
	transporttest.RunSourcer(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		cfg, _ := testConfig(t)
		s := newServer(t, cfg)
		cls := make([]transport.Client, n)
		for i := range cls {
			cls[i] = dial(t, cfg, s)
		}
		waitClients(t, s, n)
		return s, cls, func() {}
	}, tcpEcho)
}

// tcpEcho is a repair source: a Server that answers every frame with
// itself, to its sender.
func tcpEcho(t *testing.T) string {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		echo := func(frame []byte, from transport.Peer) { _ = s.SendTo(from, frame) }
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Poll(echo, 5*time.Millisecond); err != nil {
				return
			}
		}
	}()
	return s.Addr().String()
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.MustAddr(t)
}

// Dial with several addresses connects to the first that accepts: a
// cluster's standbys refuse, its primary accepts.
func TestDial_SkipsRefusingAddresses(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	cfg.Addrs = []string{freeAddr(t), freeAddr(t), s.Addr().String()}
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClients(t, s, 1)
	if got := c.ServerAddr(); got != s.Addr().String() {
		t.Fatalf("ServerAddr = %q, want %q", got, s.Addr())
	}
	cfg.Addrs = []string{freeAddr(t), freeAddr(t)}
	if _, err := Dial(cfg); err == nil || !strings.Contains(err.Error(), cfg.Addrs[1]) {
		t.Fatalf("Dial to no server: err = %v, want one naming every address", err)
	}
}

// The primary a client follows goes away and another member starts
// serving: the client finds it among its addresses, with no change of
// configuration, and frames flow both ways again.
func TestClient_MovesToTheAddressThatAccepts(t *testing.T) {
	cfg, _ := testConfig(t)
	a, b, cAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	scfg := cfg
	scfg.Addr = b
	s1 := newServer(t, scfg)
	cfg.Addrs = []string{a, b, cAddr}
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitClients(t, s1, 1)
	for round, next := range []string{cAddr, a, b} {
		prev := c.ServerAddr()
		s1.Close()
		scfg.Addr = next
		s2 := newServer(t, scfg)
		eventually(t, fmt.Sprintf("round %d: client on %s", round, next), c, ignore, func() bool { return c.Connected() && c.ServerAddr() == next })
		waitClients(t, s2, 1)
		if c.Reconnects() != uint64(round+1) {
			t.Fatalf("round %d: Reconnects = %d, want %d (moved from %s)", round, c.Reconnects(), round+1, prev)
		}
		c.Send([]byte("to the new primary"))
		c.Flush()
		var r recorder
		eventually(t, "command after the move", s2, r.handle, func() bool { return len(r.frames) > 0 })
		s2.Publish([]byte("from the new primary"))
		s2.Flush()
		var rc recorder
		eventually(t, "stream after the move", c, rc.handle, func() bool { return len(rc.frames) > 0 })
		if string(r.frames[0]) != "to the new primary" || string(rc.frames[0]) != "from the new primary" {
			t.Fatalf("round %d: got %q and %q", round, r.frames[0], rc.frames[0])
		}
		s1 = s2
	}
}

// Open starts with no server up (a standby before the first primary is
// elected) and connects once one accepts.
func TestOpen_ConnectsWhenAServerComesUp(t *testing.T) {
	cfg, _ := testConfig(t)
	a, b := freeAddr(t), freeAddr(t)
	cfg.Addrs = []string{a, b}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Connected() {
		t.Fatal("connected with no server")
	}
	if err := c.Send([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	scfg := cfg
	scfg.Addr = b
	s := newServer(t, scfg)
	eventually(t, "client connected", c, ignore, func() bool { return c.Connected() })
	waitClients(t, s, 1)
	if c.ServerAddr() != b {
		t.Fatalf("ServerAddr = %q, want %q", c.ServerAddr(), b)
	}
}

func TestConfig_AddrsValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addrs = []string{"127.0.0.1:1", "nope"}
	err := cfg.Validate()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Addrs") {
		t.Fatalf("Validate = %v, want ErrConfig naming Addrs", err)
	}
}

// Conformance holds for a client given several addresses of which one
// serves.
func TestConformance_SeveralAddrs(t *testing.T) {
	transporttest.Run(t, conformanceSession(func(t *testing.T, cfg *Config, server string) {
		cfg.Addrs = []string{freeAddr(t), server}
	}))
}
