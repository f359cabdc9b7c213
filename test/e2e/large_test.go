package e2e

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/tcp"
)

// bigReceiver keeps a copy of every message of another account.
type bigReceiver struct {
	mu   sync.Mutex
	got  [][]byte
	self string
}

func (b *bigReceiver) OnMessage(m *node.Message) {
	if m.Internal() || m.Account.String() == b.self {
		return
	}
	b.mu.Lock()
	b.got = append(b.got, append([]byte(nil), m.Payload...))
	b.mu.Unlock()
}

func (b *bigReceiver) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got)
}

// TestE2E_SixteenMiBMessages: payloads of 16 MiB cross real sockets intact,
// fragmented into 1472-byte datagrams, with loss injected at the receiver.
func TestE2E_SixteenMiBMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MiB")
	}
	for _, kind := range []string{"udp", "tcp"} {
		t.Run(kind, func(t *testing.T) { sixteenMiB(t, kind) })
	}
}

func sixteenMiB(t *testing.T, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc := groups(16)
	tc := tcp.DefaultConfig()
	tc.Addr = freeTCPAddr(t)
	var srv transport.Server
	var err error
	if kind == "udp" {
		srv, err = multicast.NewServer(mc)
	} else {
		srv, err = tcp.NewServer(tc)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	scfg := sequencer.DefaultConfig()
	scfg.Session = 16
	scfg.Epoch = 1
	scfg.RingBytes = 1 << 15 * scfg.MaxPacketBytes // two 16 MiB messages in 1472-byte packets
	agent, err := sequencer.NewAgent(scfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(runCtx) }()

	open := func(seed uint64, loss float64) transport.Client {
		f := fault.Config{Loss: loss, Seed: seed}
		var cl transport.Client
		if kind == "udp" {
			c := mc
			c.Faults, c.FaultStream = f, seed
			cl, err = multicast.NewClient(c)
		} else {
			c := tc
			c.Faults = f
			cl, err = tcp.Dial(c)
		}
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	recv := &bigReceiver{self: "RECV"}
	rcfg := node.DefaultConfig()
	rcfg.Account = "RECV"
	rcfg.Rewind = true
	rn, err := node.New(rcfg, recv, open(1, 0.01))
	if err != nil {
		t.Fatal(err)
	}
	scfgN := node.DefaultConfig()
	scfgN.Account = "SEND"
	scfgN.BlockWhenFull = true
	scfgN.Window = 4
	sn, err := node.New(scfgN, &bigReceiver{self: "SEND"}, open(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 2)
	for _, n := range []*node.Node{rn, sn} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- err
			}
		}()
	}
	r := rand.New(rand.NewPCG(16, 16))
	var sent [][]byte
	for i := 0; i < 2; i++ {
		p := make([]byte, 16<<20)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		sent = append(sent, p)
		if _, err := sn.Send(p); err != nil {
			t.Fatal(err)
		}
	}
	for recv.count() < len(sent) {
		select {
		case err := <-errc:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", recv.count(), len(sent))
		case <-time.After(20 * time.Millisecond):
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i := range sent {
		if !bytes.Equal(recv.got[i], sent[i]) {
			t.Fatalf("message %d: %d bytes arrived, differing from the %d sent", i, len(recv.got[i]), len(sent[i]))
		}
	}
	t.Logf("%s: 2 x 16 MiB intact; sequencer naks=%d retransmitted=%d", kind, agent.Stats().Naks, agent.Stats().Retransmitted)
}
