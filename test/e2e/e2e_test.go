// Package e2e runs the sequencer and several nodes over real sockets (UDP
// multicast on loopback, TCP, and both at once) with injected loss, and
// checks what a user would: every command acknowledged, every node's
// stream dense and identical to every other's.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/hybrid"
	"github.com/seqd/seqd/transport/tcp"
)

// entry is what a node saw at one seq; every node must see the same.
type entry struct {
	account uint64
	inst    uint8
	cmd     uint64
	crc     uint32
}

type recorder struct {
	name     string
	n        *node.Node
	mu       sync.Mutex
	check    *check.Stream // every node reads from seq 1
	stream   []entry
	mine     int
	commands int
	err      error
}

func (r *recorder) OnMessage(m *node.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := r.check.Observe(m); (v.Fault == check.SeqGap || v.Fault == check.SeqRepeat) && r.err == nil {
		r.err = fmt.Errorf("%s: seq %d, want %d", r.name, m.Seq, v.PrevSeq+1)
	}
	r.stream = append(r.stream, entry{uint64(m.Account), m.Instance, m.CmdSeq, crc32.ChecksumIEEE(m.Payload)})
	if !m.Internal() {
		r.commands++
		if m.Mine() {
			r.mine++
		}
	}
}

func (r *recorder) snapshot() (int, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commands, r.mine, r.err
}

func freeTCPAddr(t *testing.T) string {
	t.Helper()
	return freeport.MustAddr(t)
}

// groups returns a multicast config on loopback with groups and a port no
// other test uses.
func groups(seed uint64) multicast.Config {
	r := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	c := multicast.DefaultConfig()
	port := freeport.GroupPortsOr(2, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	c.StreamGroup = fmt.Sprintf("239.79.%d.%d:%d", a, b, port)
	c.CommandGroup = fmt.Sprintf("239.80.%d.%d:%d", a, b, port+1)
	return c
}

// udpArgs are the seqd flags of the UDP multicast transport on mc's
// groups.
func udpArgs(mc multicast.Config) []string {
	return []string{"--transport", "udp", "--udp.stream-group", mc.StreamGroup, "--udp.command-group", mc.CommandGroup}
}

type scenario struct {
	udpNodes, tcpNodes int
	count              int // commands per node
	loss               float64
	dropTCP            bool // the sequencer cuts every TCP connection midway
}

func runScenario(t *testing.T, sc scenario) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	faults := func(seed uint64) fault.Config {
		return fault.Config{Loss: sc.loss, Dup: sc.loss / 5, Reorder: sc.loss / 5, Seed: seed}
	}
	mc := groups(uint64(sc.udpNodes*10 + sc.tcpNodes))
	tc := tcp.DefaultConfig()
	tc.Addr = freeTCPAddr(t)

	var servers []transport.Server
	if sc.udpNodes > 0 {
		c := mc
		c.Faults = faults(100)
		s, err := multicast.NewServer(c)
		if err != nil {
			t.Fatalf("multicast server: %v", err)
		}
		servers = append(servers, s)
	}
	var tcpSrv *tcp.Server
	if sc.tcpNodes > 0 {
		c := tc
		c.Faults = faults(200)
		s, err := tcp.NewServer(c)
		if err != nil {
			t.Fatalf("tcp server: %v", err)
		}
		tcpSrv = s
		servers = append(servers, s)
	}
	srv := servers[0]
	if len(servers) > 1 {
		srv = hybrid.NewServer(servers...)
	}
	defer srv.Close()
	scfg := sequencer.DefaultConfig()
	scfg.Session = 77
	scfg.Epoch = 1
	scfg.RingBytes = 1 << 14 * scfg.MaxPacketBytes
	agent, err := sequencer.NewAgent(scfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	runCtx, stopAll := context.WithCancel(ctx)
	defer func() { stopAll(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(runCtx) }()

	var recs []*recorder
	var tcpClients []*tcp.Client
	errc := make(chan error, 16)
	for i := 0; i < sc.udpNodes+sc.tcpNodes; i++ {
		var cl transport.Client
		if i < sc.udpNodes {
			c := mc
			c.Faults = faults(uint64(i + 1))
			c.FaultStream = uint64(i + 1)
			cl, err = multicast.NewClient(c)
		} else {
			c := tc
			c.Faults = faults(uint64(i + 1))
			var tcl *tcp.Client
			tcl, err = tcp.Dial(c)
			tcpClients = append(tcpClients, tcl)
			cl = tcl
		}
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer cl.Close()
		r := &recorder{name: fmt.Sprintf("N%d", i), check: check.New(check.Config{FirstSeq: 1})}
		cfg := node.DefaultConfig()
		cfg.Account = r.name
		cfg.Rewind = true // the checker compares whole streams from seq 1
		cfg.BlockWhenFull = true
		cfg.Window = 256
		cfg.ResendInterval = 20 * time.Millisecond
		if i%2 == 1 {
			cfg.Mode = node.Fast
		}
		if r.n, err = node.New(cfg, r, cl); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := r.n.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", r.name, err)
			}
		}()
		go func() {
			defer wg.Done()
			p := make([]byte, 200)
			for k := 0; k < sc.count && runCtx.Err() == nil; k++ {
				p[0], p[1] = byte(k), byte(i)
				if _, err := r.n.SendContext(runCtx, p[:50+k%150]); err != nil && runCtx.Err() == nil {
					errc <- fmt.Errorf("%s send: %w", r.name, err)
					return
				}
			}
		}()
	}

	// Wait until every command is acknowledged and every node delivered
	// the whole stream.
	dropped := !sc.dropTCP
	for {
		select {
		case err := <-errc:
			t.Fatal(err)
		case <-ctx.Done():
			for _, r := range recs {
				n, mine, err := r.snapshot()
				t.Logf("%s commands=%d mine=%d err=%v", r.name, n, mine, err)
			}
			t.Fatalf("no convergence: sequencer last seq %d", agent.LastSeq())
		case <-time.After(20 * time.Millisecond):
		}
		done := true
		for _, r := range recs {
			n, mine, err := r.snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if mine < sc.count || n < sc.count*len(recs) {
				done = false
			}
			if !dropped && n > sc.count*len(recs)/2 {
				// Midway: the connections die; the clients reconnect and
				// the nodes repair what they missed meanwhile.
				peers := tcpSrv.Peers(nil)
				for _, p := range peers {
					tcpSrv.Disconnect(p)
				}
				t.Logf("cut %d TCP connections at %d commands delivered", len(peers), n)
				dropped = true
			}
		}
		if done {
			break
		}
	}
	stopAll()
	wg.Wait()
	ref := recs[0].stream
	for _, r := range recs {
		if r.commands != sc.count*len(recs) || r.mine != sc.count {
			t.Fatalf("%s delivered %d commands (%d its own), want %d (%d)", r.name, r.commands, r.mine, sc.count*len(recs), sc.count)
		}
	}
	for _, r := range recs[1:] {
		n := min(len(r.stream), len(ref))
		for i := 0; i < n; i++ {
			if r.stream[i] != ref[i] {
				t.Fatalf("%s and %s differ at seq %d: %+v vs %+v", recs[0].name, r.name, i+1, ref[i], r.stream[i])
			}
		}
	}
	if sc.dropTCP {
		for i, c := range tcpClients {
			if c.Reconnects() == 0 {
				t.Errorf("TCP client %d never reconnected after the cut", i)
			}
		}
	}
	st := agent.Stats()
	t.Logf("sequenced %d messages; sequencer: duplicates=%d naks=%d retransmitted=%d", len(ref), st.Duplicates, st.Naks, st.Retransmitted)
	if sc.loss > 0 && st.Naks == 0 {
		t.Errorf("loss was injected but no NAK was ever answered: the repair path was not exercised")
	}
}

func TestE2E_MulticastLoss(t *testing.T) {
	runScenario(t, scenario{udpNodes: 3, count: 3000, loss: 0.05})
}

func TestE2E_TCPLoss(t *testing.T) {
	runScenario(t, scenario{tcpNodes: 3, count: 3000, loss: 0.05})
}

func TestE2E_TCPReconnectResumes(t *testing.T) {
	runScenario(t, scenario{tcpNodes: 3, count: 4000, loss: 0.01, dropTCP: true})
}

func TestE2E_Hybrid(t *testing.T) {
	runScenario(t, scenario{udpNodes: 2, tcpNodes: 2, count: 2000, loss: 0.02})
}
