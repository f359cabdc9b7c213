package receiver

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// fastLive is a fast receiver that starts at the first live packet.
func fastLive(t *testing.T) *drive {
	cfg := testConfig()
	cfg.Mode = Fast
	cfg.Rewind = false
	return &drive{t: t, r: newTest(t, cfg)}
}

// TestReceiver_FastNodeMissingAWholeEpochStopsDiverged: a fast receiver
// delivered seqs 1..10 of epoch 1, which epoch 2 cut at 5; it heard none
// of epoch 2 (6..15); epoch 3 starts at 16. The repair of 11..15 comes in
// epoch 2's packets, whose start (6) lies below what it delivered from
// epoch 1: it must stop with ErrDiverged, not deliver 11..15 on top of
// epoch 1's 6..10 (issue 14, item 1).
func TestReceiver_FastNodeMissingAWholeEpochStopsDiverged(t *testing.T) {
	one, two, three := newStream(t), newStream(t), newStream(t)
	two.epoch, two.epochStart = 2, 6
	three.epoch, three.epochStart = 3, 16
	d := fastLive(t)
	p := one.msgs(1, 10)
	setStable(p, 5)
	d.step(0, Sequencer, p)
	d.step(0, Sequencer, three.msgs(16, 2))
	two.flags = wire.PacketRetransmit
	err := d.step(0, Sequencer, two.msgs(11, 5))
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("Step = %v, want ErrDiverged; delivered %v", err, d.seqs())
	}
	for _, m := range d.delivered {
		if m.Seq > 10 {
			t.Fatalf("delivered seq %d of epoch %d on top of epoch 1's 6..10", m.Seq, m.Epoch)
		}
	}
}

// TestReceiver_EpochStartLearnedLateBelowWhatWasDeliveredStopsDiverged: a
// fast receiver delivered 1..15 of epoch 1 (a deposed primary's) and went
// on into epoch 3 (from 16) without hearing of epoch 2; when a header of
// epoch 2 (a repair for others) or epoch 2's EpochStart record tells
// that epoch 2 began at 6, the receiver delivered 6..15 from epoch 1,
// which the failover cut: ErrDiverged, whatever it delivered since.
func TestReceiver_EpochStartLearnedLateBelowWhatWasDeliveredStopsDiverged(t *testing.T) {
	epochStart := func(e uint32) []byte {
		var ib [wire.InternalBytes]byte
		b, err := wire.AppendInternal(ib[:], &wire.Internal{Type: wire.InternalEpochStart, Epoch: e, Value: 6})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		repair func(two *stream) []byte
	}{
		{"header of a repair", func(two *stream) []byte { return two.msgs(7, 2) }},
		{"the EpochStart record in the current epoch's repair", func(two *stream) []byte {
			three := newStream(t)
			three.epoch, three.epochStart = 3, 16
			three.flags = wire.PacketRetransmit
			return three.packet(6, 17, 6000, rec{payload: epochStart(2), flags: wire.FlagInternal | wire.FlagSeqGen})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, two, three := newStream(t), newStream(t), newStream(t)
			two.epoch, two.epochStart = 2, 6
			three.epoch, three.epochStart = 3, 16
			d := fastLive(t)
			p := one.msgs(1, 15)
			setStable(p, 5)
			d.step(0, Sequencer, p)
			d.step(0, Sequencer, three.msgs(16, 2))
			if got := len(d.delivered); got != 17 || d.r.Err() != nil {
				t.Fatalf("delivered %v, err %v", d.seqs(), d.r.Err())
			}
			two.flags = wire.PacketRetransmit
			err := d.step(0, Sequencer, tc.repair(two))
			if !errors.Is(err, ErrDiverged) {
				t.Fatalf("Step = %v, want ErrDiverged", err)
			}
			t.Log(err)
		})
	}
}
