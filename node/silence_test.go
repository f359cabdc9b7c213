package node

import (
	"testing"
	"time"
)

// silenceRecorder is a recorder that also hears of silence.
type silenceRecorder struct {
	recorder
	silent  []time.Duration
	resumed int
}

func (s *silenceRecorder) OnStreamSilent(d time.Duration) { s.silent = append(s.silent, d) }
func (s *silenceRecorder) OnStreamResumed()               { s.resumed++ }

// TestCore_SilentStreamIsToldToTheHandler: the group lost its quorum, so
// no sequencer publishes, not even heartbeats; a library node with a
// command in flight used to hear only silence (the CLI warns, the library
// said nothing). On defaults, the Handler's OnStreamSilent is called once
// the stream has been silent for Config.SilenceTimeout, again at a tenth
// of that rate while it lasts, and OnStreamResumed when a packet comes
// (issue 14, item 13).
func TestCore_SilentStreamIsToldToTheHandler(t *testing.T) {
	s := newStream(t)
	h := &silenceRecorder{}
	c, err := NewCore(testConfig(), h, &outbox{})
	if err != nil {
		t.Fatal(err)
	}
	sec := int64(time.Second)
	step(t, c, 0, s.msgs(1, 2))
	if _, err := c.Send(0, []byte("in flight")); err != nil {
		t.Fatal(err)
	}
	for now := int64(0); now <= 40*sec; now += 10 * int64(time.Millisecond) {
		c.Tick(now)
	}
	if len(h.silent) == 0 {
		t.Fatalf("40s without a packet, a command in flight: the handler was told nothing")
	}
	timeout := DefaultConfig().SilenceTimeout
	if h.silent[0] < timeout || h.silent[0] > timeout+20*time.Millisecond || len(h.silent) != 2 {
		t.Fatalf("told of silence after %v, want %v once then every %v: %v", h.silent[0], timeout, 10*timeout, h.silent)
	}
	step(t, c, 40*sec, s.heartbeat(3, 2, 40*sec))
	if h.resumed != 1 {
		t.Fatalf("stream back: resumed %d times, want 1", h.resumed)
	}
}
