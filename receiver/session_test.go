package receiver

import (
	"errors"
	"testing"
	"time"
)

// TestReceiver_ForeignSessionNeverStopsAReceiverWhileTheFollowedPublishes:
// forged heartbeats of another session for 2.5 s, while the followed one
// publishes, are counted and dropped; the receiver delivers on. Before,
// after SessionTimeout every receiver that delivered stopped
// ("two sequencers on one channel"): tails, nodes, the replayer and both
// standbys exit, and the primary loses its quorum.
func TestReceiver_ForeignSessionNeverStopsAReceiverWhileTheFollowedPublishes(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	ms := int64(time.Millisecond)
	d.step(0, Sequencer, s.msgs(1, 1))
	forged := newStream(t)
	forged.session = 99
	q := uint64(2)
	for now := 10 * ms; now <= 2500*ms; now += 10 * ms {
		if err := d.step(now, Sequencer, forged.heartbeat(1, 0, now)); !errors.Is(err, ErrOtherSession) {
			t.Fatalf("Step(foreign) at %dms = %v, want ErrOtherSession", now/ms, err)
		}
		if now%(100*ms) == 0 {
			d.step(now, Sequencer, s.msgs(q, 1))
			q++
		}
	}
	if d.r.Err() != nil || d.r.Session() != 77 || len(d.delivered) != int(q-1) {
		t.Fatalf("err %v, session %d, delivered %v", d.r.Err(), d.r.Session(), d.seqs())
	}
	if st := d.r.Stats(); st.OtherSession != 250 {
		t.Fatalf("stats %+v, want OtherSession 250", st)
	}
}

// TestReceiver_NewSessionReplacingASilentOneStillStops: the followed
// session silent for SessionTimeout while another publishes is a
// restarted sequencer; a receiver that delivered stops with ErrNewSession
// (and one that delivered nothing follows it: see the node tests).
func TestReceiver_NewSessionReplacingASilentOneStillStops(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	ms := int64(time.Millisecond)
	d.step(0, Sequencer, s.msgs(1, 1))
	next := newStream(t)
	next.session = 99
	for now := 10 * ms; now <= 1200*ms && d.r.Err() == nil; now += 10 * ms {
		_ = d.step(now, Sequencer, next.heartbeat(1, 0, now))
	}
	if !errors.Is(d.r.Err(), ErrNewSession) {
		t.Fatalf("Err() = %v, want ErrNewSession", d.r.Err())
	}
}
