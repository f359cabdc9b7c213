package transport

import (
	"testing"
	"time"
)

// TestSilenceWatch_RepeatsAndSaysWhenItResumes: a stream that stops (a
// group without quorum) is warned after `after`, again every
// SilenceRepeat while it lasts (it said nothing for 30 s), and its
// resumption is said once (it was not).
func TestSilenceWatch_RepeatsAndSaysWhenItResumes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	after := 3 * time.Second
	w := NewSilenceWatch(after, 5, t0)
	var events []SilenceEvent
	var at []time.Duration
	frames := uint64(5)
	for ms := 250; ms <= 40000; ms += 250 {
		if ms == 32000 {
			frames++ // the stream resumes at 32 s
		}
		if ms > 32000 {
			frames++
		}
		if ev, _ := w.Tick(t0.Add(time.Duration(ms)*time.Millisecond), frames); ev != SilenceNone {
			events = append(events, ev)
			at = append(at, time.Duration(ms)*time.Millisecond)
		}
	}
	// 3 s, then every 6 s: 9, 15, 21, 27; resumed at 32 s.
	want := []time.Duration{3 * time.Second, 9 * time.Second, 15 * time.Second, 21 * time.Second, 27 * time.Second, 32 * time.Second}
	if len(at) != len(want) {
		t.Fatalf("events at %v, want at %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("events at %v, want at %v", at, want)
		}
	}
	if events[0] != SilenceStarted || events[1] != SilenceGoesOn || events[len(events)-1] != SilenceEnded {
		t.Fatalf("events %v", events)
	}
	if !w.Heard() {
		t.Fatal("Heard false")
	}
	if SilenceRepeat(time.Hour) != 30*time.Second || SilenceRepeat(time.Millisecond) != 5*time.Second {
		t.Fatal("SilenceRepeat bounds")
	}
}
