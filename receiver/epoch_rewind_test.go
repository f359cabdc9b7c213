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
