package receiver

import (
	"errors"
	"testing"
	"time"
)

// TestReceiver_NewEpochBelowBelievedStableIsReportedThenStops: a receiver
// believes stable 10 of epoch 1 (a header said so); the group then starts
// epoch 2 at seq 8, at or below it, and epoch 1 falls silent. Each packet
// of epoch 2 is dropped (a failover keeps everything stable, so the start
// contradicts what the receiver believes), but never in silence: Step
// returns ErrEpochBelowStable and EpochBelowStable counts; once epoch 2 has
// been the only live epoch for SessionTimeout, the receiver stops with
// that error, naming the epoch, its start and the stable. Before, every
// packet was dropped without a word, forever (issue 14, item 8).
func TestReceiver_NewEpochBelowBelievedStableIsReportedThenStops(t *testing.T) {
	one, two := newStream(t), newStream(t)
	two.epoch, two.epochStart = 2, 8
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, one.msgs(1, 10)) // stable 10
	if d.r.Stable() != 10 {
		t.Fatalf("stable %d", d.r.Stable())
	}
	var err error
	var at time.Duration
	for at = 10 * time.Millisecond; at <= 5*time.Second; at += 10 * time.Millisecond {
		if err = d.step(int64(at), Sequencer, two.heartbeat(9, 8, int64(at))); d.r.Err() != nil {
			break
		}
		if !errors.Is(err, ErrEpochBelowStable) {
			t.Fatalf("at %v: Step = %v, want ErrEpochBelowStable (stats %+v)", at, err, d.r.Stats())
		}
	}
	if !errors.Is(d.r.Err(), ErrEpochBelowStable) {
		t.Fatalf("after %v of epoch 2 only: Err() = %v, want ErrEpochBelowStable; stats %+v", at, d.r.Err(), d.r.Stats())
	}
	if at < cfg.SessionTimeout || at > cfg.SessionTimeout+20*time.Millisecond {
		t.Fatalf("stopped after %v, want SessionTimeout (%v)", at, cfg.SessionTimeout)
	}
	if st := d.r.Stats(); st.EpochBelowStable == 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Log(d.r.Err())
}
