package multicast_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

type counting struct{ mine, all atomic.Int64 }

func (c *counting) OnMessage(m *node.Message) {
	if m.Internal() {
		return
	}
	c.all.Add(1)
	if m.Mine() {
		c.mine.Add(1)
	}
}

// A NAK from a sender the kernel cannot answer (source port 0: the reply
// is refused with EINVAL) arrives while the sequencer is under load. The
// refusal is loss: the sequencer keeps serving, the nodes keep delivering,
// and the refusal is counted. (Before, the refused reply made Flush fail
// and Agent.Run return: the sequencer died.)
func TestAgent_NakFromPortZeroUnderLoad(t *testing.T) {
	cfg := multicast.TestConfig(t)
	srv, err := multicast.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	scfg := sequencer.DefaultConfig()
	scfg.Session = 77
	agent, err := sequencer.NewAgent(scfg, srv, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	agentErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); agentErr <- agent.Run(ctx) }()

	const nodes, count = 2, 3000
	hs := make([]*counting, nodes)
	ns := make([]*node.Node, nodes)
	nodeErr := make(chan error, 2*nodes)
	for i := range hs {
		cl, err := multicast.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ncfg := node.DefaultConfig()
		ncfg.Account = fmt.Sprintf("N%d", i)
		ncfg.BlockWhenFull = true
		// Each node counts the whole stream: one that starts live after
		// the other sent all its commands (under load) would never see
		// them, and the test waited for them until its deadline.
		ncfg.Rewind = true
		hs[i] = &counting{}
		n, err := node.New(ncfg, hs[i], cl)
		if err != nil {
			t.Fatal(err)
		}
		ns[i] = n
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				nodeErr <- fmt.Errorf("node %d Run: %w", i, err)
			}
		}()
		go func() {
			defer wg.Done()
			p := make([]byte, 100)
			for k := 0; k < count && ctx.Err() == nil; k++ {
				if _, err := n.SendContext(ctx, p); err != nil && ctx.Err() == nil {
					nodeErr <- fmt.Errorf("node %d Send: %w", i, err)
					return
				}
			}
		}()
	}

	// NAKs from port 0 while the nodes send, until the stream is done and
	// a reply was refused. Not only until the stream is done: a quick
	// stream ends after a NAK or two, and a NAK that comes within
	// MulticastRepairWindow of a node's NAK of seq 1 (the nodes rewind) is
	// answered by multicast, which nobody refuses.
	cmd := netip.MustParseAddrPort(cfg.CommandGroup)
	nak, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: scfg.Epoch, Session: scfg.Session, FromSeq: 1, ToSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	// pause waits 5 ms, failing if the sequencer or a node stopped or the
	// test's time ran out (what says how far it got).
	pause := func(what func() string) {
		t.Helper()
		select {
		case err := <-agentErr:
			t.Fatalf("the sequencer stopped: Agent.Run = %v (refused replies: %d)", err, srv.Counters().Refused)
		case err := <-nodeErr:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("no progress: %s", what())
		case <-time.After(5 * time.Millisecond):
		}
	}
	progress := func() string {
		return fmt.Sprintf("nodes delivered %d and %d of %d, refused replies %d; sequencer stats %+v",
			hs[0].all.Load(), hs[1].all.Load(), nodes*count, srv.Counters().Refused, agent.Stats())
	}
	for {
		done := srv.Counters().Refused > 0
		for _, h := range hs {
			if h.mine.Load() < count || h.all.Load() < nodes*count {
				done = false
			}
		}
		if done {
			break
		}
		multicast.SendFromPortZero(t, cmd, nak)
		pause(progress)
	}
	if c := srv.Counters(); c.Refused == 0 {
		t.Fatalf("no refused reply counted; counters %+v, sequencer stats %+v", c, agent.Stats())
	}
	// The sequencer goes on after the refusal (the refusal may have come
	// after the stream): one more command is sequenced and delivered.
	if _, err := ns[0].SendContext(ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	for hs[0].mine.Load() < count+1 {
		pause(func() string {
			return fmt.Sprintf("a command after the refusal: node 0 delivered %d of its %d", hs[0].mine.Load(), count+1)
		})
	}
	t.Logf("refused replies: %d, NAKs served: %d", srv.Counters().Refused, agent.Stats().Naks)
}
