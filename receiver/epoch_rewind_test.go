package receiver

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestReceiver_RewindFromOldEpochStartRepairIsNoDivergence: a receiver
// that starts at RewindFrom = N (a standby reopened on its store, a node
// restarting from its snapshot) delivered nothing below N itself. A
// multicast repair of an old epoch's EpochStart record below N (another
// receiver asked for it) is a duplicate, not proof that this receiver
// delivered a cut record; it stopped with ErrDiverged ("seqs up to N-1
// were delivered in epoch 0"), found by the simulator (seed 45 of the
// cluster scenario).
func TestReceiver_RewindFromOldEpochStartRepairIsNoDivergence(t *testing.T) {
	cfg := testConfig()
	cfg.Mode = Fast
	cfg.RewindFrom = 34
	r := newTest(t, cfg)
	s := newStream(t)
	// Live: epoch 1 from seq 1, the receiver sees seqs 40..41 first: it
	// has delivered nothing yet (34..39 are missing).
	if err := r.Step(0, s.msgs(40, 2), Sequencer); err != nil {
		t.Fatal(err)
	}
	// A multicast repair of seq 2, the EpochStart record of epoch 1.
	var ib [wire.InternalBytes]byte
	payload, err := wire.AppendInternal(ib[:], &wire.Internal{Type: wire.InternalEpochStart, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.flags = wire.PacketRetransmit
	rep := s.packet(2, 41, 2000, rec{payload: payload, flags: wire.FlagInternal | wire.FlagSeqGen})
	if err := r.Step(0, rep, Sequencer); err != nil && !errors.Is(err, ErrDiverged) {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("a repair of an old EpochStart below RewindFrom stopped the receiver: %v", err)
	}
}

// TestReceiver_RewindEpochOlderFirstPacketIsNoDivergence: a replayer
// reopened on its store (seqs 1..49, the last of them in epoch 2, which
// started at 41) whose first packet after the restart is a deposed
// primary's, of epoch 1, delayed or replayed. Epoch 2's packets then
// look like a new epoch starting below RewindFrom, and with nothing
// known of the store's epoch the receiver stopped with ErrDiverged
// ("seqs up to 49 were delivered in epoch 0"; simulator seed 244 once
// it replayed ended epochs' packets). RewindEpoch tells it the store's
// seqs are epoch 2's; a store whose seqs were of epoch 1 did diverge.
func TestReceiver_RewindEpochOlderFirstPacketIsNoDivergence(t *testing.T) {
	for _, c := range []struct {
		storeEpoch uint32
		diverged   bool
	}{{2, false}, {1, true}} {
		cfg := testConfig()
		cfg.Rewind, cfg.RewindFrom, cfg.RewindEpoch = true, 50, c.storeEpoch
		r := newTest(t, cfg)
		old := newStream(t) // epoch 1 from seq 1, cut at 40 (its stable was at most that)
		if err := r.Step(0, old.msgs(38, 3), Sequencer); err != nil {
			t.Fatal(err)
		}
		cur := newStream(t)
		cur.epoch, cur.epochStart = 2, 41
		err := r.Step(1, cur.msgs(50, 2), Sequencer)
		if got := errors.Is(err, ErrDiverged) || errors.Is(r.Err(), ErrDiverged); got != c.diverged {
			t.Fatalf("store of epoch %d: diverged=%v (%v, %v), want %v", c.storeEpoch, got, err, r.Err(), c.diverged)
		}
		if c.diverged {
			continue
		}
		ready := r.Ready()
		if len(ready.Deliver) != 2 || ready.Deliver[0].Seq != 50 || ready.Deliver[0].Epoch != 2 {
			t.Fatalf("store of epoch 2: delivered %+v, want seqs 50, 51 of epoch 2", ready.Deliver)
		}
	}
}
