package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// The in-process link tests run both ends of a real link on loopback: a
// real sequencer on a TCP fan-out at site A, a SendEnd following it, a
// ReceiveEnd republishing on site B's TCP fan-out, over real sockets.

// freeAddr reserves a loopback TCP address (closed again: the caller
// listens on it).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tcpClient dials a site's TCP fan-out.
func tcpClient(t *testing.T, addr string) *tcp.Client {
	t.Helper()
	tc := tcp.DefaultConfig()
	tc.Addr = addr
	c, err := tcp.Dial(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tcpSequencer runs a sequencer of session on a TCP fan-out of its own
// until ctx ends and returns its address.
func tcpSequencer(t *testing.T, ctx context.Context, session uint64) string {
	t.Helper()
	srv := tcpSite(t)
	runSequencer(t, ctx, srv, session)
	return srv.(*tcp.Server).Addr().String()
}

// runSequencer runs a sequencer of session on srv until ctx ends; the
// test's cleanup waits for it.
func runSequencer(t *testing.T, ctx context.Context, srv transport.Server, session uint64) {
	t.Helper()
	scfg := sequencer.DefaultConfig()
	scfg.Session, scfg.Epoch = session, 1
	scfg.MaxPacketBytes = 1472
	agent, err := sequencer.NewAgent(scfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(ctx) }()
	t.Cleanup(wg.Wait)
}

// runEnd runs an end until the test ends (or it fails) and returns its
// error's channel.
func runEnd(t *testing.T, ctx context.Context, run func(context.Context) error) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done, fin := make(chan error, 1), make(chan struct{})
	go func() { done <- run(ctx); close(fin) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-fin:
		case <-time.After(10 * time.Second):
			t.Error("a bridge end did not stop")
		}
	})
	return done
}

// startSend runs a sending end of site, following the sequencer at seqAddr.
func startSend(t *testing.T, ctx context.Context, seqAddr string, edit func(*Config)) *SendEnd {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Role, cfg.Site = Send, "A"
	cfg.Service.Dir = t.TempDir()
	edit(&cfg)
	s, err := NewSendEnd(cfg, tcpClient(t, seqAddr), tcpSite(t))
	if err != nil {
		t.Fatal(err)
	}
	runEnd(t, ctx, s.Run)
	return s
}

// sendNode runs a node at the site of addr and sends n payloads.
func sendNode(t *testing.T, ctx context.Context, addr, account string, n int) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.Account = account
	nd, err := node.New(cfg, nopHandler{}, tcpClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	runEnd(t, ctx, nd.Run)
	for i := 0; i < n; i++ {
		if _, err := nd.SendContext(ctx, []byte(fmt.Sprintf("%s-%04d", account, i))); err != nil {
			t.Fatal(err)
		}
	}
}

type nopHandler struct{}

func (nopHandler) OnMessage(*node.Message) {}

// siteFrames collects what a site's client receives, on a goroutine of
// its own (a Client is used by one goroutine), which also NAKs seqs
// 1..2 every 10 ms while naks is set.
type siteFrames struct {
	naks  atomic.Uint64 // the session to NAK (0: none)
	mu    sync.Mutex
	gones int
	seqs  map[uint64]bool // seqs of data records seen
	high  uint64          // the highest seq of a data record seen
}

func watchSite(t *testing.T, ctx context.Context, c transport.Client) *siteFrames {
	t.Helper()
	s := &siteFrames{seqs: map[uint64]bool{}}
	var p wire.Packet
	h := func(f []byte, _ transport.Peer) {
		k, err := wire.PeekKind(f)
		if err != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		switch k {
		case wire.KindGone:
			s.gones++
		case wire.KindData:
			if wire.DecodePacket(f, &p) == nil && p.Count > 0 {
				for q := p.FirstSeq; q <= p.LastSeq(); q++ {
					s.seqs[q] = true
				}
				s.high = max(s.high, p.LastSeq())
			}
		}
	}
	nb := make([]byte, wire.NakBytes)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if session := s.naks.Load(); session != 0 {
				if f, err := wire.AppendNak(nb, &wire.Nak{Epoch: 1, Session: session, FromSeq: 1, ToSeq: 2}); err == nil {
					_ = c.Send(f)
					_ = c.Flush()
				}
			}
			if _, err := c.Poll(h, 10*time.Millisecond); err != nil {
				return
			}
		}
	}()
	t.Cleanup(wg.Wait)
	return s
}

func (s *siteFrames) state() (gones int, has1 bool, high uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gones, s.seqs[1], s.high
}

// A node of the far site that NAKs seq 1 before the receiving end holds
// the stream (the origin not yet known, or nothing arrived yet) gets no
// answer, not a Gone from the empty store, which would stop it ("seqs
// 1..2 no longer retained"); once the end holds seq 1 the node gets it.
func TestReceiveEnd_NoGoneBeforeItHoldsTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const session = 81
	seqAddr := tcpSequencer(t, ctx, session)
	tcpAddr := freeAddr(t)

	siteB := tcpSite(t)
	rc := receiveConfig(t, "B")
	rc.TCP = []string{tcpAddr}
	rc.RewindAddr = freeAddr(t)
	r, err := NewReceiveEnd(rc, siteB)
	if err != nil {
		t.Fatal(err)
	}
	done := runEnd(t, ctx, r.Run)
	nodeB := tcpClient(t, siteB.(*tcp.Server).Addr().String())
	seen := watchSite(t, ctx, nodeB)

	// A rewind from seq 1 asked now is answered once the end holds it.
	rewound := make(chan wire.RewindReply, 1)
	go rewindReply(t, rc.RewindAddr, session, rewound)
	// NAKs while no sending end exists: the end cannot know the origin
	// nor hold anything.
	seen.naks.Store(session)
	time.Sleep(200 * time.Millisecond)
	s := startSend(t, ctx, seqAddr, func(c *Config) {
		c.TCP = []string{tcpAddr}
		c.UDP = r.UDPAddrs()
	})
	_ = s
	sendNode(t, ctx, seqAddr, "NOGONE", 5)
	for deadline := time.Now().Add(20 * time.Second); ; {
		gones, has1, _ := seen.state()
		if gones > 0 {
			t.Fatalf("the receiving end answered %d NAKs of seq 1 with Gone before it held the stream", gones)
		}
		if has1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the receiving end stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("seq 1 never reached site B (stats %+v)", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if gones, _, _ := seen.state(); gones > 0 {
		t.Fatalf("%d Gone answers", gones)
	}
	if st := r.Stats(); st.Unheld == 0 {
		t.Fatalf("no NAK was left unanswered before the stream arrived: %+v", st)
	}
	select {
	case rep := <-rewound:
		if rep.Status != wire.RewindOK || rep.Oldest != 1 {
			t.Fatalf("the early rewind from seq 1 was answered %+v, want RewindOK from seq 1", rep)
		}
	case <-ctx.Done():
		t.Fatal("the early rewind was never answered")
	}
}

// rewindReply asks addr for a rewind from seq 1 (retrying until it can
// connect) and sends back the reply.
func rewindReply(t *testing.T, addr string, session uint64, out chan<- wire.RewindReply) {
	var c net.Conn
	var err error
	for i := 0; i < 200; i++ {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("rewind dial: %v", err)
		return
	}
	defer c.Close()
	if _, err := c.Write(wire.AppendRewindRequest(nil, &wire.RewindRequest{Session: session, FromSeq: 1})); err != nil {
		t.Errorf("rewind request: %v", err)
		return
	}
	var b [wire.RewindReplyBytes]byte
	_ = c.SetReadDeadline(time.Now().Add(25 * time.Second))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Errorf("rewind reply: %v", err)
		return
	}
	var rep wire.RewindReply
	if err := wire.DecodeRewindReply(b[:], &rep); err != nil {
		t.Errorf("rewind reply: %v", err)
		return
	}
	out <- rep
}

// A link with TCP channels only checks the origin too: the hellos come
// on the channel's control connection, and a receiving end of the
// origin's own site refuses the stream.
func TestLink_TCPOnlyRefusesItsOwnOrigin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seqAddr := tcpSequencer(t, ctx, 82)
	tcpAddr := freeAddr(t)
	startSend(t, ctx, seqAddr, func(c *Config) { c.TCP = []string{tcpAddr} })
	sendNode(t, ctx, seqAddr, "LOOP", 3)
	rc := receiveConfig(t, "A")
	rc.TCP, rc.UDP = []string{tcpAddr}, nil
	siteA2 := tcpSite(t)
	r, err := NewReceiveEnd(rc, siteA2)
	if err != nil {
		t.Fatal(err)
	}
	done := runEnd(t, ctx, r.Run)
	select {
	case err := <-done:
		if !errors.Is(err, ErrLoop) {
			t.Fatalf("Run returned %v, want ErrLoop", err)
		}
	case <-ctx.Done():
		t.Fatalf("the receiving end carried a stream of its own site over TCP (stats %+v)", r.Stats())
	}
	if st := r.Stats(); st.Published != 0 {
		t.Fatalf("published %d packets of its own site's stream", st.Published)
	}
}

// recorder keeps a node's own messages in delivery order.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) OnMessage(m *node.Message) {
	if m.Mine() && !m.Internal() {
		r.mu.Lock()
		r.got = append(r.got, string(m.Payload))
		r.mu.Unlock()
	}
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// A link with TCP channels only carries the far site's commands back to
// the origin over the control connections: a node at B sends, the
// origin's sequencer sequences each command once, and B's node sees its
// own messages in the stream, once each, in order. So does a link whose
// UDP channel hears nothing (cut: its flow goes elsewhere).
func TestLink_CommandsBackOverTCP(t *testing.T) {
	t.Run("tcp only", func(t *testing.T) { commandsBack(t, false, nil, nil) })
	t.Run("udp silent", func(t *testing.T) { commandsBack(t, true, nil, nil) })
}

// commandsBack runs a link A -> B (TLS on the TCP channels with sendTLS
// and recvTLS when set) and a node at B whose commands go back over the
// link to A's sequencer and come back to it in the stream.
func commandsBack(t *testing.T, silentUDP bool, sendTLS, recvTLS *tlsconf.Identity) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seqAddr := tcpSequencer(t, ctx, 83)
	tcpAddr := freeAddr(t)
	nowhere, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer nowhere.Close()
	startSend(t, ctx, seqAddr, func(c *Config) {
		c.TCP = []string{tcpAddr}
		c.TLS = sendTLS
		if silentUDP {
			c.UDP = []string{nowhere.LocalAddr().String()}
		}
	})
	sendNode(t, ctx, seqAddr, "ORIGIN", 3) // the stream exists before B's node
	rc := receiveConfig(t, "B")
	rc.TCP = []string{tcpAddr}
	rc.TLS = recvTLS
	if !silentUDP {
		rc.UDP = nil
	}
	siteB := tcpSite(t)
	r, err := NewReceiveEnd(rc, siteB)
	if err != nil {
		t.Fatal(err)
	}
	done := runEnd(t, ctx, r.Run)
	ncfg := node.DefaultConfig()
	ncfg.Account = "FARB"
	rec := &recorder{}
	nd, err := node.New(ncfg, rec, tcpClient(t, siteB.(*tcp.Server).Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	runEnd(t, ctx, nd.Run)
	const n = 50
	for i := 0; i < n; i++ {
		if _, err := nd.SendContext(ctx, []byte(fmt.Sprintf("b-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if len(rec.messages()) >= n {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the receiving end stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("B's node saw %d of its %d messages come back (stats %+v)", len(rec.messages()), n, r.Stats())
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(200 * time.Millisecond) // a doubled command would come by now
	got := rec.messages()
	if len(got) != n {
		t.Fatalf("%d messages, want %d: %v", len(got), n, got)
	}
	for i, p := range got {
		if w := fmt.Sprintf("b-%03d", i); p != w {
			t.Fatalf("message %d: %q, want %q", i, p, w)
		}
	}
	if st := r.Stats(); st.CommandsTCP == 0 {
		t.Fatalf("no command went over TCP: %+v", st)
	}
}
