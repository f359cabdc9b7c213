package node

import (
	"encoding/binary"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestCore_StepRewindAllocatesNothing: rewind packets fed in order after
// the live stream started (far ahead) are delivered with no allocation,
// and the Core says when it caught up.
func TestCore_StepRewindAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.ReadOnly = true
	cfg.Commit(0)
	c, d := newBenchCore(t, cfg)
	c.SetRewindOpen(true)
	s := newStream(t)
	const live = 1 << 30
	if err := c.Step(0, s.heartbeat(live, live-1, 0)); err != nil {
		t.Fatal(err)
	}
	if !c.Started() || c.RewindCaughtUp() {
		t.Fatal("the heartbeat did not start the core, or it believes it caught up")
	}
	f := newLiveFeed(t, 5, 256)
	step := func() {
		binary.LittleEndian.PutUint64(f.frame[24:], f.next)
		binary.LittleEndian.PutUint64(f.frame[40:], f.next*1000)
		f.next += f.count
		wire.SetStable(f.frame, f.next-1)
		if err := c.StepRewind(0, f.frame); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("StepRewind delivering 5 messages: %v allocs, want 0", a)
	}
	if d.n == 0 || c.Delivered() != f.next-1 || !c.Rewinding() {
		t.Fatalf("delivered %d (next fed %d), rewinding %v", c.Delivered(), f.next, c.Rewinding())
	}
	if st := c.Stats(); st.NaksSent != 0 {
		t.Fatalf("%d NAKs while rewinding", st.NaksSent)
	}
}
