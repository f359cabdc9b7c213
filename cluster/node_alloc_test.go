package cluster

import (
	"testing"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// TestPrimaryShell_TurnAllocatesNothing: a turn of the primary's loop that
// takes a command, a standby's ack and publishes allocates nothing (the
// ack tracker is the real QuorumAcks).
func TestPrimaryShell_TurnAllocatesNothing(t *testing.T) {
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl := net.Client()
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Standalone = 7, false
	cfg.RingBytes = 1 << 20
	srv := net.Server()
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
	sh := newPrimaryShell(n, core, srv, acks)

	var w wire.CommandWriter
	buf := make([]byte, 2048)
	ackB := make([]byte, wire.StatusStandbyBytes)
	payload := make([]byte, 64)
	drain := func([]byte, transport.Peer) {}
	seq := uint64(0)
	turn := func() {
		seq++
		if err := w.Reset(buf, wire.MustAccount("alloc"), 1, 0, 7); err != nil {
			t.Fatal(err)
		}
		c := wire.Command{CmdSeq: seq, Payload: payload}
		if err := w.Append(&c); err != nil {
			t.Fatal(err)
		}
		if err := cl.Send(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		st := wire.Status{Session: 7, Epoch: 1, Flags: wire.StatusStandby | wire.StatusReplayer | wire.StatusReadOnly, Contiguous: seq, Delivered: seq, Member: 2}
		a, err := wire.AppendStatus(ackB, &st)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Send(a); err != nil {
			t.Fatal(err)
		}
		if err := cl.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.turn(); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Poll(drain, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 { // the new sender, pools and the ring's first chunk
		turn()
	}
	if allocs := testing.AllocsPerRun(1000, turn); allocs != 0 {
		t.Fatalf("%.2f allocations per turn", allocs)
	}
	if got := core.Stats().Commands; got != seq {
		t.Fatalf("sequenced %d commands of %d", got, seq)
	}
	if n.stable.Load() == 0 || n.stable.Load() != core.Stable() {
		t.Fatalf("stable %d (core %d): the standby's acks did not count", n.stable.Load(), core.Stable())
	}
}
