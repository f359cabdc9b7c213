package standby

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
)

// TestStandby_StepWorkCatchUpFrom: a standby driven by Step and Work
// stores, applies and acks as Run does; a second one catches up from it
// in process (CatchUpFrom) to a cut and holds nothing above it; Work
// after a Takeover says so.
func TestStandby_StepWorkCatchUpFrom(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 20)
	fc := &standbytest.Client{Keep: true}
	cfg := standbyConfig(t, 2)
	cfg.AckWritten = true
	a := newStandby(t, cfg, fc)
	for _, b := range pkts {
		a.Step(b, 0)
	}
	if err := a.Work(); err != nil {
		t.Fatal(err)
	}
	last := src.Core.Published()
	if a.Contiguous() != last {
		t.Fatalf("holds %d, want %d", a.Contiguous(), last)
	}
	acks := fc.Acks(t)
	if len(acks) == 0 || acks[len(acks)-1].Contiguous != last {
		t.Fatalf("acks %+v, want one at %d", acks, last)
	}
	b := newStandby(t, standbyConfig(t, 3), &standbytest.Client{})
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
	if !bytes.Equal(tk.State.Snapshot(), standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatal("the caught-up State differs from the stream's at the cut")
	}
	if err := b.Work(); !errors.Is(err, ErrTakenOver) {
		t.Fatalf("Work after Takeover = %v, want ErrTakenOver", err)
	}
}

// TestStandby_AckWrittenFsyncsLazily: a standby that acks what it wrote
// waits for no fsync, so it does not fsync every Store.SyncInterval (1 ms:
// a fifth of a standby's CPU in `seqd bench --sequencers 3`) but every
// WrittenSyncInterval; one that acks durable seqs still fsyncs at once.
// The clock is the test's: no timing.
func TestStandby_AckWrittenFsyncsLazily(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 10)
	for _, written := range []bool{true, false} {
		var now int64
		cfg := standbyConfig(t, 2)
		cfg.AckWritten = written
		cfg.Clock = func() int64 { return now }
		fc := &standbytest.Client{Keep: true}
		s := newStandby(t, cfg, fc)
		// Ten turns 2 ms apart, a packet in each: past Store.SyncInterval
		// every turn, well within WrittenSyncInterval.
		for _, p := range pkts {
			now += int64(2 * time.Millisecond)
			s.Step(p, 0)
			if err := s.Work(); err != nil {
				t.Fatal(err)
			}
		}
		fsyncs := s.Stats().Fsyncs
		if written && fsyncs != 0 {
			t.Fatalf("AckWritten: %d fsyncs in 20 ms, want none before WrittenSyncInterval (%v)", fsyncs, cfg.WrittenSyncInterval)
		}
		if !written && fsyncs < uint64(len(pkts))-1 {
			t.Fatalf("durable acks: %d fsyncs in %d turns 2 ms apart, want one per turn", fsyncs, len(pkts))
		}
		if acks := fc.Acks(t); len(acks) == 0 || acks[len(acks)-1].Contiguous != src.Core.Published() {
			t.Fatalf("AckWritten=%v: acks %+v, want the last at %d", written, acks, src.Core.Published())
		}
		if written {
			now += int64(cfg.WrittenSyncInterval)
			if err := s.Work(); err != nil {
				t.Fatal(err)
			}
			if s.Stats().Fsyncs == 0 {
				t.Fatalf("AckWritten: no fsync once WrittenSyncInterval passed")
			}
		}
	}
}
