package node

import (
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestCore_ResumeFromAfterWhatIsHeld: a rewind that fails resumes after
// the highest seq the node holds whole, not at the next seq to deliver:
// records held until stable advances are not fetched again.
func TestCore_ResumeFromAfterWhatIsHeld(t *testing.T) {
	cfg := testConfig()
	cfg.RewindFrom = 1
	c, h, _ := newTestCore(t, cfg)
	s := newStream(t)
	if got := c.ResumeFrom(); got != 1 {
		t.Fatalf("ResumeFrom before the stream = %d, want 1", got)
	}
	step(t, c, 1, s.heartbeat(21, 10, 1)) // live: the tail is 20, stable 10
	for _, first := range []uint64{1, 6, 11} {
		pkt := s.msgs(first, 5)
		wire.SetStable(pkt, min(first+4, 10)) // the stream's stable then
		if err := c.StepRewind(2, pkt); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.Delivered(); d != 10 || len(h.seqs()) != 10 {
		t.Fatalf("delivered %d (%v), want 1..10 (stable 10)", d, h.seqs())
	}
	if got := c.ResumeFrom(); got != 16 {
		t.Fatalf("ResumeFrom = %d, want 16 (1..15 held, 11..15 waiting for stable)", got)
	}
}
