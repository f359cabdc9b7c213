package standby

import (
	"testing"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/wire"
)

// TestStandby_StashPathAllocatesNothing: once warm, packets that wait in
// the stash behind a gap, and go to the store when the gap fills,
// allocate nothing per packet.
func TestStandby_StashPathAllocatesNothing(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 1000)
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	i := 0
	round := func() {
		s.mu.Lock()
		for k := 4; k >= 0; k-- { // the first of five comes last
			s.core.persist(pkts[i+k])
		}
		s.publishLocked()
		s.mu.Unlock()
		i += 5
	}
	for range 20 {
		round()
	}
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("%v allocations per round of 5 packets, want 0", n)
	}
	var last wire.Packet
	if err := wire.DecodePacket(pkts[i-1], &last); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if err := s.Err(); err != nil || s.Contiguous() != last.LastSeq() || st.Stashed != uint64(4*i/5) {
		t.Fatalf("holds %d (want %d), stashed %d (want %d), %v", s.Contiguous(), last.LastSeq(), st.Stashed, 4*i/5, err)
	}
}
