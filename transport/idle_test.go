package transport

import (
	"testing"
	"time"
)

func TestIdle_SpinsAfterActivityThenBlocks(t *testing.T) {
	var blocking Idle
	if w := blocking.Wait(5, time.Millisecond); w != time.Millisecond {
		t.Fatalf("zero Idle waits %v, want the longest wait", w)
	}
	i := Idle{Spin: time.Hour}
	if w := i.Wait(0, time.Millisecond); w != time.Millisecond {
		t.Fatalf("before any frame: %v, want to block", w)
	}
	if w := i.Wait(3, time.Millisecond); w != 0 {
		t.Fatalf("after a frame: %v, want 0 (spin)", w)
	}
	if w := i.Wait(0, time.Millisecond); w != 0 {
		t.Fatalf("idle within Spin: %v, want 0 (spin)", w)
	}
	i.Spin = time.Nanosecond
	i.Wait(1, time.Millisecond)
	time.Sleep(time.Millisecond)
	if w := i.Wait(0, time.Millisecond); w != time.Millisecond {
		t.Fatalf("idle past Spin: %v, want to block", w)
	}
}
