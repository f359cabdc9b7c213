package transport

import (
	"testing"
	"time"
)

func countGosched(t *testing.T) *int {
	n := new(int)
	old := gosched
	gosched = func() { *n++ }
	t.Cleanup(func() { gosched = old })
	return n
}

// A loop coming around every 100 us yields once per YieldInterval; one
// that blocks 50 ms per iteration (an idle node between heartbeats) never.
func TestYield_OnlyWhileBusyAtMostOncePerInterval(t *testing.T) {
	calls := countGosched(t)
	var y Yield
	start := int64(time.Hour) // any monotonic origin
	step := int64(100 * time.Microsecond)
	for now := start; now < start+int64(time.Second); now += step {
		y.Maybe(now)
	}
	want := int(time.Second / YieldInterval)
	if *calls < want-1 || *calls > want {
		t.Fatalf("busy for 1 s: %d yields, want about %d (one per %v)", *calls, want, YieldInterval)
	}
	if y.Count() != uint64(*calls) {
		t.Fatalf("Count %d, %d calls", y.Count(), *calls)
	}
	*calls = 0
	var idle Yield
	for now := start; now < start+int64(10*time.Second); now += int64(50 * time.Millisecond) {
		idle.Maybe(now)
	}
	if *calls != 0 {
		t.Fatalf("idle (50 ms per iteration): %d yields, want 0", *calls)
	}
}

// An idle loop that goes round twice per wake-up (the frame, then the
// work it queued) never yields; a burst after idle yields once it has
// lasted YieldInterval.
func TestYield_ShortBurstsDoNotYield(t *testing.T) {
	calls := countGosched(t)
	var y Yield
	now := int64(time.Hour)
	for i := 0; i < 100; i++ { // idle: two iterations per 50 ms
		now += int64(50 * time.Millisecond)
		y.Maybe(now)
		now += int64(50 * time.Microsecond)
		y.Maybe(now)
	}
	if *calls != 0 {
		t.Fatalf("idle loop with two iterations per wake-up: %d yields, want 0", *calls)
	}
	start := now + int64(50*time.Millisecond)
	for now = start; now < start+int64(YieldInterval); now += int64(100 * time.Microsecond) {
		if y.Maybe(now) {
			t.Fatalf("yielded %v into a burst, before it lasted %v", time.Duration(now-start), YieldInterval)
		}
	}
	if !y.Maybe(now) || *calls != 1 {
		t.Fatalf("burst of %v: %d yields, want 1", time.Duration(now-start), *calls)
	}
}

func TestYield_AllocatesNothing(t *testing.T) {
	countGosched(t)
	var y Yield
	now := int64(0)
	if a := testing.AllocsPerRun(1000, func() { now += int64(time.Millisecond); y.Maybe(now) }); a != 0 {
		t.Fatalf("%v allocs per call", a)
	}
}
