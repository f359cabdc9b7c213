package receiver

import (
	"errors"
	"slices"
	"testing"
)

// TestReceiver_RewindPacketsDoNotRevertTheEpoch: a rewinder (from seq 1)
// started by a live packet of epoch 2 (start 10) has delivered nothing in
// epoch 2 while its rewind brings epoch 1's history. When epoch 2 is
// silent for SessionTimeout (an idle stretch) while the rewind goes on,
// the rewind's packets are no sign that epoch 1 still publishes: it went
// back to epoch 1 on them (EpochReverted), then refused epoch 2's next
// live packet as starting below the stable it had heard
// (ErrEpochBelowStable; simulator seed 77 with the rewind stream).
func TestReceiver_RewindPacketsDoNotRevertTheEpoch(t *testing.T) {
	cfg := testConfig()
	d := &drive{t: t, r: newTest(t, cfg)}
	cur := newStream(t)
	cur.epoch, cur.epochStart = 2, 10
	if err := d.step(0, Sequencer, cur.msgs(20, 1)); err != nil {
		t.Fatal(err)
	}
	old := newStream(t) // epoch 1: 1..9
	timeout := int64(cfg.SessionTimeout)
	for i, at := range []int64{0, timeout / 2, timeout} {
		if err := d.r.StepRewind(at+1, old.msgs(uint64(1+3*i), 3)); err != nil {
			t.Fatalf("rewind packet %d: %v", i, err)
		}
		d.collect()
	}
	if err := d.step(timeout+2, Sequencer, cur.msgs(21, 1)); err != nil {
		t.Fatalf("epoch 2's live packet after the rewind: %v", err)
	}
	if st := d.r.Stats(); st.EpochReverted != 0 || st.EpochBelowStable != 0 {
		t.Fatalf("reverted %d, below stable %d: want neither", st.EpochReverted, st.EpochBelowStable)
	}
	if got := d.seqs(); len(got) != 9 || got[0] != 1 || got[8] != 9 {
		t.Fatalf("delivered %v, want 1..9 (10..19 not yet)", got)
	}
}

// TestReceiver_LiveJoinerStartsOverOnTheEpochThatCutItsStart: a live-tail
// joiner whose first packet was a deposed primary's (epoch 1, seqs 30..31,
// past the cut) and that delivered nothing then hears epoch 2, which
// starts at 25. It owes nothing: it starts over on epoch 2's packet
// (StartedOver) instead of stopping with ErrDiverged, as it did (seed 89
// with the replayed epochs), and the cut records never reach it.
func TestReceiver_LiveJoinerStartsOverOnTheEpochThatCutItsStart(t *testing.T) {
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	old := newStream(t)
	stale := old.packet(30, 20, 30_000, rec{payload: []byte("cut30")}, rec{payload: []byte("cut31")})
	if err := d.step(0, Sequencer, stale); err != nil {
		t.Fatal(err)
	}
	cur := newStream(t)
	cur.epoch, cur.epochStart = 2, 25
	if err := d.step(1, Sequencer, cur.msgs(25, 3)); err != nil {
		t.Fatalf("epoch 2 after a deposed primary's first packet: %v", err)
	}
	if err := d.step(2, Sequencer, cur.msgs(28, 4)); err != nil || errors.Is(d.r.Err(), ErrDiverged) {
		t.Fatalf("epoch 2 goes on: %v (%v)", err, d.r.Err())
	}
	if got, want := d.seqs(), []uint64{25, 26, 27, 28, 29, 30, 31}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for _, m := range d.delivered {
		if m.Epoch != 2 {
			t.Fatalf("seq %d delivered in epoch %d (%q): a cut record", m.Seq, m.Epoch, m.Payload)
		}
	}
	if st := d.r.Stats(); st.StartedOver != 1 {
		t.Fatalf("StartedOver %d, want 1", st.StartedOver)
	}
}
