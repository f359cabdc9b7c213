package standby

import (
	"bytes"
	"slices"
	"testing"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/wire"
)

// TestStandby_EpochStartLearnedLate: a standby reopened on a store whose
// tail lies past epoch 1's cut, cut off from raft while epochs 2 and 3
// began, gets epoch 3's packets first (from the stream) and only then
// learns from the failover state where epoch 2 began (KnowEpoch). That
// older epoch start still counts: the standby stops counting its tail
// past epoch 1's cut, heals, and follows both epochs to the new
// primary's State. (An epoch-start table that took only epochs newer
// than the newest it knew dropped epoch 2, and the standby went on
// reporting the cut records of its tail as held.)
func TestStandby_EpochStartLearnedLate(t *testing.T) {
	src, e2, e3, pkts, cut := standbytest.LaterEpochs(t, 6, 5)
	c3 := e3.Core
	cut2 := e2.Core.Published()
	if cut2+1 <= src.Core.Published()+1 {
		t.Fatalf("epoch 3 starts at %d, not above the stale tail (to %d) and a gap: the test needs it there", cut2+1, src.Core.Published())
	}

	s := newStandby(t, storeHolding(t, 2, pkts), &standbytest.Client{})
	// Epoch 3 from the stream first: it starts above the tail and a gap
	// (waiting for repair), so the stream alone says nothing of the cut.
	for _, b := range e3.Pkts {
		s.frame(b, 0)
	}
	s.KnowEpoch(2, cut+1) // the failover state, late
	if got := s.Contiguous(); got != cut {
		t.Fatalf("told epoch 2 began at %d after seeing epoch 3, Contiguous = %d, want %d", cut+1, got, cut)
	}
	if seq, snap := s.Snapshot(); seq != cut || !bytes.Equal(snap, standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatalf("told epoch 2 began at %d after seeing epoch 3, the State is at %d: want the stream's at %d", cut+1, seq, cut)
	}
	// The live stream goes on; the standby heals and repairs epoch 2
	// and the start of epoch 3.
	seen := len(e3.Pkts)
	for _, b := range e3.Commands(t, 3) {
		s.frame(b, 0)
	}
	for _, b := range append(slices.Clone(e2.Pkts), e3.Pkts[:seen]...) {
		rep := bytes.Clone(b)
		wire.SetPacketFlags(rep, wire.PacketRetransmit)
		s.frame(rep, 0)
	}
	if err := s.Err(); err != nil || s.Contiguous() != c3.Published() {
		t.Fatalf("after the late epoch start: %v, holds %d (want %d), %+v", err, s.Contiguous(), c3.Published(), s.Stats())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c3.State().Snapshot()) {
		t.Fatal("State differs from the epoch 3 primary's")
	}
}
