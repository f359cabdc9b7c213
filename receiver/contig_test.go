package receiver

import (
	"testing"
	"time"
)

// TestReceiver_HeldSeqsAreNotNaked: a safe receiver holds 3..4 (ahead,
// not yet stable) when 1..2 arrive in order and are delivered; 3..4 are
// held whole, so nothing is missing and no NAK goes out. Before, settle
// moved contiguous to 2 only (store runs the walk over held seqs, settle
// did not) and the receiver NAKed 3, which it held (issue 14, item 9).
func TestReceiver_HeldSeqsAreNotNaked(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Mode = Safe
	cfg.HoldBytes = 0
	d := &drive{t: t, r: newTest(t, cfg)}
	ahead := s.msgs(3, 2)
	setStable(ahead, 2)
	d.step(0, Sequencer, ahead)
	d.step(0, Sequencer, s.msgs(1, 2)) // stable 2
	if got := d.seqs(); len(got) != 2 {
		t.Fatalf("delivered %v", got)
	}
	for ms := int64(1); ms <= 200; ms++ {
		d.tick(ms * int64(time.Millisecond))
	}
	if n := d.naks(); len(n) != 0 {
		t.Fatalf("NAKed %d..%d (%d NAKs), all held; contiguous %d", n[0].nak.FromSeq, n[0].nak.ToSeq, len(n), d.r.Contiguous())
	}
	if c := d.r.Contiguous(); c != 4 {
		t.Fatalf("contiguous %d, want 4", c)
	}
}
