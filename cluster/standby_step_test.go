package cluster

import (
	"bytes"
	"errors"
	"testing"
)

// TestStandby_StepWorkCatchUpFrom: a standby driven by Step and Work
// stores, applies and acks as Run does; a second one catches up from it
// in process (CatchUpFrom) to a cut and holds nothing above it; Work
// after a Takeover says so.
func TestStandby_StepWorkCatchUpFrom(t *testing.T) {
	src := newStream(t)
	pkts := src.commands(t, 20)
	fc := &fakeClient{keep: true}
	cfg := standbyConfig(t, 2)
	cfg.AckWritten = true
	a := newStandby(t, cfg, fc)
	for _, b := range pkts {
		a.Step(b, 0)
	}
	if err := a.Work(); err != nil {
		t.Fatal(err)
	}
	last := src.core.Published()
	if a.Contiguous() != last {
		t.Fatalf("holds %d, want %d", a.Contiguous(), last)
	}
	acks := fc.acks(t)
	if len(acks) == 0 || acks[len(acks)-1].Contiguous != last {
		t.Fatalf("acks %+v, want one at %d", acks, last)
	}
	b := newStandby(t, standbyConfig(t, 3), &fakeClient{})
	cut := last - 5
	if err := b.CatchUpFrom(cut, a); err != nil {
		t.Fatal(err)
	}
	if b.Contiguous() != cut {
		t.Fatalf("caught up to %d, want the cut %d", b.Contiguous(), cut)
	}
	tk, err := b.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tk.State.Snapshot(), referenceState(t, pkts, cut).Snapshot()) {
		t.Fatal("the caught-up State differs from the stream's at the cut")
	}
	if err := b.Work(); !errors.Is(err, ErrTakenOver) {
		t.Fatalf("Work after Takeover = %v, want ErrTakenOver", err)
	}
}
