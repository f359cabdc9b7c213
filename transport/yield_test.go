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

// After an idle stretch, the first busy iterations yield at once: the
// loop has not been rescheduled for as long as it was idle.
func TestYield_BurstAfterIdleYieldsAtOnce(t *testing.T) {
	calls := countGosched(t)
	var y Yield
	now := int64(time.Hour)
	for i := 0; i < 5; i++ { // idle
		now += int64(50 * time.Millisecond)
		y.Maybe(now)
	}
	now += int64(50 * time.Microsecond) // the first frame of a burst
	if !y.Maybe(now) || *calls != 1 {
		t.Fatalf("first busy iteration after idle: no yield (%d calls)", *calls)
	}
	now += int64(50 * time.Microsecond)
	if y.Maybe(now) {
		t.Fatal("yielded again 50 us later")
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
