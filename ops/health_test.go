package ops

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressLive: live while the count moves within the stall window;
// not live, with the loop named, once it stops; live again when it moves.
func TestProgressLive(t *testing.T) {
	var turns atomic.Uint64
	live := ProgressLive("the test loop", turns.Load, 30*time.Millisecond)
	if err := live(); err != nil {
		t.Fatalf("first check: %v", err)
	}
	for range 3 {
		time.Sleep(15 * time.Millisecond)
		turns.Add(1)
		if err := live(); err != nil {
			t.Fatalf("turning: %v", err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if err := live(); err == nil || !strings.Contains(err.Error(), "the test loop has not turned for") {
		t.Fatalf("stalled: %v", err)
	}
	turns.Add(1)
	if err := live(); err != nil {
		t.Fatalf("turning again: %v", err)
	}
}
