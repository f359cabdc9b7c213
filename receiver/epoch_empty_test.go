package receiver

import (
	"slices"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestReceiver_EmptyEpochLearnedFromEpochStart: epoch 1 ran 1..9, epoch
// 2 began at 10 and was cut whole (nothing of it survived), epoch 3
// starts at 10. A receiver rewinding from seq 1 that never heard epoch 2
// knows epoch 3's start from its headers but not where epoch 1 was cut:
// a repair of epoch 1's packet, stored with the stable its primary had
// then (3), may carry cut records past it, so records 4..9 are fenced,
// and no packet of epoch 2 will ever tell. It waited forever (a far-site
// node of simulator seed 31 with the bridge, once the ended epochs'
// packets were replayed). Epoch 3's EpochStart record names the epoch
// before it (Extra = 1): the receiver learns that epoch 2 starts at 10
// too, so epoch 1 ran to 9, and the repair goes through.
func TestReceiver_EmptyEpochLearnedFromEpochStart(t *testing.T) {
	for _, named := range []bool{false, true} {
		d := &drive{t: t, r: newTest(t, testConfig())}
		cur := newStream(t)
		cur.epoch, cur.epochStart = 3, 10
		if err := d.step(0, Sequencer, cur.heartbeat(13, 12, 20_000)); err != nil {
			t.Fatal(err)
		}
		old := newStream(t)
		old.flags = wire.PacketRetransmit
		recs := make([]rec, 9)
		for i := range recs {
			recs[i] = rec{payload: []byte{'m', byte('1' + i)}, account: wire.MustAccount("other"), cmdSeq: uint64(i + 1), dt: int64(i)}
		}
		repair := old.packet(1, 3, 1000, recs...)
		if err := d.step(1, Sequencer, repair); err != nil {
			t.Fatal(err)
		}
		// Epoch 3's first packet: its EpochStart record, then 11, 12.
		var ib [wire.InternalBytes]byte
		x := wire.Internal{Type: wire.InternalEpochStart, Epoch: 3, Value: 10}
		if named {
			x.Extra = 1
		}
		payload, err := wire.AppendInternal(ib[:], &x)
		if err != nil {
			t.Fatal(err)
		}
		first := cur.packet(10, 12, 10_000, rec{payload: payload, flags: wire.FlagInternal | wire.FlagSeqGen},
			rec{payload: []byte("m11"), account: wire.MustAccount("other"), cmdSeq: 10, dt: 1},
			rec{payload: []byte("m12"), account: wire.MustAccount("other"), cmdSeq: 11, dt: 2})
		if err := d.step(2, Sequencer, first, repair); err != nil {
			t.Fatal(err)
		}
		want := []uint64{1, 2, 3}
		if named {
			want = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		}
		if st := d.r.Stats(); st.BadEpoch != 0 {
			t.Fatalf("BadEpoch %d for a consistent EpochStart record", st.BadEpoch)
		}
		if got := d.seqs(); !slices.Equal(got, want) {
			t.Fatalf("EpochStart naming the previous epoch: %v: delivered %v, want %v (fenced %d)", named, got, want, d.r.Stats().Fenced)
		}
		for _, m := range d.delivered {
			want := uint32(1)
			if m.Seq >= 10 {
				want = 3
			}
			if m.Epoch != want {
				t.Fatalf("seq %d delivered in epoch %d, want %d", m.Seq, m.Epoch, want)
			}
		}
	}
}

// TestReceiver_EpochStartContradictingAKnownStartIsCounted: an
// EpochStart record whose Extra would put epoch 2's start at 10 when the
// receiver heard epoch 2 start at 5 is not believed, and not dropped in
// silence (BadEpoch).
func TestReceiver_EpochStartContradictingAKnownStartIsCounted(t *testing.T) {
	d := &drive{t: t, r: newTest(t, testConfig())}
	two := newStream(t)
	two.epoch, two.epochStart = 2, 5
	if err := d.step(0, Sequencer, two.heartbeat(6, 5, 5_000)); err != nil {
		t.Fatal(err)
	}
	cur := newStream(t)
	cur.epoch, cur.epochStart = 3, 10
	var ib [wire.InternalBytes]byte
	payload, err := wire.AppendInternal(ib[:], &wire.Internal{Type: wire.InternalEpochStart, Epoch: 3, Value: 10, Extra: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.step(1, Sequencer, cur.packet(10, 10, 10_000, rec{payload: payload, flags: wire.FlagInternal | wire.FlagSeqGen})); err != nil {
		t.Fatal(err)
	}
	if st := d.r.Stats(); st.BadEpoch != 1 {
		t.Fatalf("BadEpoch %d, want 1", st.BadEpoch)
	}
	if start, ok := d.r.cuts.startOf(2); !ok || start != 5 {
		t.Fatalf("epoch 2 starts at %d (%v), want 5 as heard", start, ok)
	}
}
