package sequencer

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

func standbyAck(t testing.TB, member uint64, epoch uint32, contiguous uint64) []byte {
	t.Helper()
	b, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{
		Session: testSession, Epoch: epoch, Flags: wire.StatusReplayer | wire.StatusStandby,
		Contiguous: contiguous, Delivered: contiguous, Member: member,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCore_StandbyAcksQueued: standby acks are queued for the shell, one
// per (member, epoch) with the highest seq; other statuses and acks
// beyond what was published are not; stable does not move by itself.
func TestCore_StandbyAcksQueued(t *testing.T) {
	cfg := testConfig()
	cfg.Standalone = false
	c, _ := newCore(t, cfg)
	mustStep(t, c, 0, frame(t, acctA, 1, 0, cmd(1, "a"), cmd(2, "b")))
	c.Flush(at(0)) // seqs 1..4 published
	for _, f := range [][]byte{
		standbyAck(t, 2, 1, 3),
		standbyAck(t, 3, 1, 2),
		standbyAck(t, 2, 1, 4),
		standbyAck(t, 2, 1, 1),                    // older: merged, never back
		standbyAck(t, 2, 0, 4),                    // another epoch: queued apart, the cluster decides
		standbyAck(t, 3, 1, 9),                    // beyond the tail: ignored
		statusFrame(t, acctB, 0, 4),               // a node's status: flow control only
		statusFrame(t, 0, wire.StatusReplayer, 4), // a replayer's
	} {
		mustStep(t, c, 1, f)
	}
	if !c.PendingStandbyAcks() {
		t.Fatal("no pending acks")
	}
	got := c.TakeStandbyAcks(nil)
	want := []StandbyAck{{Member: 2, Epoch: 1, Contiguous: 4}, {Member: 3, Epoch: 1, Contiguous: 2}, {Member: 2, Epoch: 0, Contiguous: 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("acks %+v, want %+v", got, want)
	}
	if c.PendingStandbyAcks() || len(c.TakeStandbyAcks(nil)) != 0 {
		t.Fatal("acks not forgotten after TakeStandbyAcks")
	}
	if c.Stable() != 0 {
		t.Fatalf("stable %d moved without SetStable", c.Stable())
	}
	if st := c.Stats(); st.StandbyAcks != 5 || st.StatusBeyondTail != 1 {
		t.Fatalf("StandbyAcks %d StatusBeyondTail %d, want 5 1", st.StandbyAcks, st.StatusBeyondTail)
	}
}

// TestCore_StandbyAcksBounded: more distinct members than the queue holds
// between two drains are dropped and counted, never grown into.
func TestCore_StandbyAcksBounded(t *testing.T) {
	cfg := testConfig()
	cfg.Standalone = false
	c, _ := newCore(t, cfg)
	c.Flush(at(0))
	for m := uint64(1); m <= maxPendingAcks+10; m++ {
		mustStep(t, c, 1, standbyAck(t, m, 1, 1))
	}
	if got := len(c.TakeStandbyAcks(nil)); got != maxPendingAcks {
		t.Fatalf("%d acks taken, want %d", got, maxPendingAcks)
	}
	if c.Stats().StandbyAcksDropped != 10 {
		t.Fatalf("dropped %d, want 10", c.Stats().StandbyAcksDropped)
	}
}

// TestCore_StandbyAckPathAllocatesNothing: decoding a standby ack, queuing
// it, taking it and setting stable allocate nothing.
func TestCore_StandbyAckPathAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.Standalone = false
	c, _ := newCore(t, cfg)
	mustStep(t, c, 0, frame(t, acctA, 1, 0, cmd(1, "a")))
	c.Flush(at(0))
	f2, f3 := standbyAck(t, 2, 1, 3), standbyAck(t, 3, 1, 3)
	buf := make([]StandbyAck, 0, maxPendingAcks)
	if n := testing.AllocsPerRun(1000, func() {
		_ = c.Step(at(1), f2, 1)
		_ = c.Step(at(1), f3, 2)
		buf = c.TakeStandbyAcks(buf[:0])
		c.SetStable(buf[0].Contiguous)
	}); n != 0 {
		t.Fatalf("%v allocations per ack round, want 0", n)
	}
	if c.Stable() != 3 {
		t.Fatalf("stable %d, want 3", c.Stable())
	}
}

// TestAgent_StableFuncMovesStable: an Agent with Standalone false moves
// stable only through its StableFunc, fed with the standby acks of the
// iteration that received them, and publishes the new stable at once.
func TestAgent_StableFuncMovesStable(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Standalone = false
	var clock int64
	a, err := NewAgent(cfg, net.Server(), func() Time { clock += 1000; return at(clock) })
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan []StandbyAck, 100)
	a.SetStableFunc(func(acks []StandbyAck, published uint64) uint64 {
		calls <- slices.Clone(acks)
		return acks[0].Contiguous // the test's quorum: the first ack
	})
	cl := net.Client()
	if err := cl.Send(frame(t, acctA, 1, 0, cmd(1, "one"), cmd(2, "two"))); err != nil {
		t.Fatal(err)
	}
	_ = cl.Flush()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()

	var tail, stable uint64
	acked := false
	for deadline := time.Now().Add(30 * time.Second); stable < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("stable %d after 30s (tail %d)", stable, tail)
		}
		if _, err := cl.Poll(func(f []byte, _ transport.Peer) {
			var p wire.Packet
			if wire.DecodePacket(f, &p) == nil {
				tail = max(tail, p.LastSeq())
				stable = max(stable, p.Stable)
			}
		}, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if stable != 0 && stable != 3 {
			t.Fatalf("stable %d: moved without the StableFunc", stable)
		}
		if tail >= 4 && !acked {
			if err := cl.Send(standbyAck(t, 2, 1, 3)); err != nil {
				t.Fatal(err)
			}
			_ = cl.Flush()
			acked = true
		}
	}
	if got := <-calls; !slices.Equal(got, []StandbyAck{{Member: 2, Epoch: 1, Contiguous: 3}}) {
		t.Fatalf("StableFunc got %+v", got)
	}
}
