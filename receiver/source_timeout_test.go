package receiver

import (
	"testing"
	"time"
)

// TestReceiver_SilentRepairSourceIsLeftAfterItsDeadline: the preferred
// repair source never answers (no repair, no Gone); after
// RepairSourceTimeout the NAKs go to the next source, which holds the
// range, and the move is counted. Before, the silent source was asked
// forever (606 NAKs in 60 s, none to the source holding the range; issue
// 14, item 9).
func TestReceiver_SilentRepairSourceIsLeftAfterItsDeadline(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.RepairSources = 2
	cfg.PreferredSource = 1
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(1, 2), s.msgs(10, 1))
	timeout := DefaultConfig().RepairSourceTimeout
	if timeout <= 0 {
		t.Fatalf("RepairSourceTimeout default %v", timeout)
	}
	end := 60 * time.Second
	for at := time.Millisecond; at <= end; at += time.Millisecond {
		d.tick(int64(at))
		if n := d.naks(); len(n) > 0 && n[len(n)-1].to == 2 {
			break
		}
	}
	naks := d.naks()
	to := map[Source]int{}
	for _, n := range naks {
		to[n.to]++
	}
	if to[2] == 0 {
		t.Fatalf("%d NAKs in %v, by source %v: none to source 2", len(naks), end, to)
	}
	if st := d.r.Stats(); st.SourceTimeouts != 1 || st.SourceSwitches != 1 {
		t.Fatalf("stats %+v, want one source timeout", st)
	}
	// Source 2 repairs: the gap closes, nothing more is asked.
	d.step(int64(end), 2, s.msgs(3, 7))
	if got := d.seqs(); len(got) != 10 {
		t.Fatalf("delivered %v", got)
	}
}
