package cluster

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// TestPrimaryShell_SlowStandbyDoesNotThrottleTheStream: of a primary's
// two standbys, one stays alive but never acks past seq 5 (a failing
// disk under durable), the other keeps up. Stable needs only a majority,
// so the stream goes on well past 5 + the flow window, stable follows the
// healthy standby, and the slow one's lag shows in the Core's Receivers.
func TestPrimaryShell_SlowStandbyDoesNotThrottleTheStream(t *testing.T) {
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	node, slow, healthy := net.Client(), net.Client(), net.Client()
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Standalone = 7, false
	cfg.MaxPacketBytes, cfg.RingBytes = 1472, 32*1472
	core, err := sequencer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mono int64
	n := &Member{deps: Deps{Clock: func() sequencer.Time {
		mono += 1000
		return sequencer.Time{Mono: mono, Wall: 1_700_000_000_000_000_000 + mono}
	}}}
	acks := NewQuorumAcks(Epoch{Session: 7, Epoch: 1, FirstSeq: 1, Self: 1, Members: []fsm.Member{{ID: 1}, {ID: 2}, {ID: 3}}})
	sh := newPrimaryShell(n, core, net.Server(), acks)

	const stuck = 5
	var w wire.CommandWriter
	buf := make([]byte, 2048)
	payload := []byte(strings.Repeat("p", 200))
	drain := func([]byte, transport.Peer) {}
	send := func(c transport.Client, b []byte) {
		t.Helper()
		if err := c.Send(b); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	ack := func(c transport.Client, member, contiguous uint64) {
		t.Helper()
		st := wire.Status{Session: 7, Epoch: 1, Flags: wire.StatusStandby | wire.StatusReplayer,
			Contiguous: contiguous, Delivered: contiguous, Member: member}
		b, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &st)
		if err != nil {
			t.Fatal(err)
		}
		send(c, b)
	}
	const turns = 400
	for seq := uint64(1); seq <= turns; seq++ {
		if err := w.Reset(buf, wire.MustAccount("flow"), 1, 0, 7); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(&wire.Command{CmdSeq: seq, Payload: payload}); err != nil {
			t.Fatal(err)
		}
		send(node, w.Bytes())
		ack(slow, 2, min(stuck, core.Published()))
		ack(healthy, 3, core.Published())
		if _, err := sh.turn(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []transport.Client{node, slow, healthy} {
			if _, err := c.Poll(drain, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	window := uint64(cfg.RingBytes) * uint64(cfg.FlowWindowPercent) / 100 / uint64(len(payload))
	st := core.Stats()
	if core.Published() < stuck+4*window || st.FlowPaused != 0 {
		t.Fatalf("a standby stuck at %d throttled the stream: published %d (flow window about %d seqs), %d command frames paused",
			stuck, core.Published(), window, st.FlowPaused)
	}
	if core.Stable() <= stuck+window {
		t.Fatalf("stable %d: it should follow the healthy standby (published %d)", core.Stable(), core.Published())
	}
	var lag *sequencer.ReceiverLag
	rs := core.Receivers(nil)
	for i := range rs {
		if rs[i].Standby && rs[i].Member == 2 {
			lag = &rs[i]
		}
	}
	if lag == nil || lag.Contiguous != stuck || lag.Lag != core.Published()-stuck {
		t.Fatalf("Receivers %+v: want standby 2 at %d lagging %d", rs, stuck, core.Published()-stuck)
	}
	t.Logf("published %d, stable %d, standby 2 lagging %d", core.Published(), core.Stable(), lag.Lag)
}
