package sequencer

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// clockSink records each published packet with the monotonic time it left.
type clockSink struct {
	mono      *int64
	published [][]byte
	at        []int64 // mono of each published packet
	sent      int
}

func (s *clockSink) Publish(pkt []byte) {
	s.published = append(s.published, bytes.Clone(pkt))
	s.at = append(s.at, *s.mono)
}

func (s *clockSink) SendTo(transport.Peer, []byte) { s.sent++ }

// TestCore_WallClockSteps drives a Core with a fake clock through three
// seconds of monotonic time: the wall clock steps back an hour after the
// first and forward a day after the second. Heartbeats, a periodic
// centralized timer, repair pacing and the hot-hot activity timeout go on
// at their rates; stamps never go back; the forward step fires the timer
// once and counts the periods it skipped.
func TestCore_WallClockSteps(t *testing.T) {
	const ms = int64(time.Millisecond)
	cfg := testConfig()
	cfg.HeartbeatInterval = 10 * time.Millisecond
	cfg.MaxHeartbeatInterval = 0 // a fixed interval: the gaps below are checked against it
	cfg.FlushDelay = time.Millisecond
	cfg.ActiveTimeout = 300 * time.Millisecond
	cfg.RetransmitBytesPerSecond = 100_000 // a 5000-byte bucket, refilled in 50ms
	cfg.MulticastRepairWindow = 0
	var mono int64 = 7 * int64(time.Hour) // any origin
	wall := int64(1_700_000_000) * int64(time.Second)
	sink := &clockSink{mono: &mono}
	c, err := NewSinkShell(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	now := func() Time { return Time{Mono: mono, Wall: wall} }
	acctC := wire.MustAccount("carol")
	// A periodic timer every 100ms of sequencer time, from 100ms on.
	if err := c.Step(now(), frame(t, acctC, 1, 0, timerCmd(t, 1, wire.TimerRequest{ID: 9, At: wall + 100*ms, Period: 100 * ms})), 1); err != nil {
		t.Fatal(err)
	}
	var (
		cmd1, cmd2  uint64 // command seqs of instances 1 and 2 of alice
		fired       [3]uint64
		stamps      [3]int64 // sequencer time at the end of each phase
		switchedBy  int      // iteration of the hot-hot switch
		repairsSent int
	)
	for i := 1; i <= 3000; i++ {
		mono += ms
		wall += ms
		switch i {
		case 1001:
			wall -= int64(time.Hour)
		case 2001:
			wall += 24 * int64(time.Hour)
		}
		phase := (i - 1) / 1000
		before := c.Stats().TimersFired
		// Instance 1 of alice (active: heard first) sends every 50ms until
		// the wall steps back, instance 2 every 50ms throughout.
		if (i == 1 || i%50 == 0) && i <= 1000 {
			cmd1++
			mustStepAt(t, c, now(), frame(t, acctA, 1, 0, cmd(cmd1, "one")))
		}
		if i%50 == 25 {
			cmd2++
			mustStepAt(t, c, now(), frame(t, acctA, 2, 0, cmd(cmd2, "two")))
		}
		switch i {
		case 1500: // drain the repair bucket
			for k := 0; c.Stats().Throttled == 0; k++ {
				if k > 1000 {
					t.Fatal("repairs never throttled")
				}
				mustStepAt(t, c, now(), nakFrame(t, testSession, 1, c.Published(), 0))
			}
		case 1700, 2500: // 200ms later the bucket has refilled
			sent := sink.sent
			mustStepAt(t, c, now(), nakFrame(t, testSession, 1, c.Published(), 0))
			if sink.sent == sent {
				t.Fatalf("iteration %d: a NAK 200ms after the bucket emptied got no repair", i)
			}
			repairsSent++
		}
		c.Flush(now())
		c.Tick(now())
		fired[phase] += c.Stats().TimersFired - before
		if switchedBy == 0 && c.Stats().ActivationSwitch > 0 {
			switchedBy = i
		}
		stamps[phase] = c.LastTime()
	}

	// Heartbeats: something is published at least every HeartbeatInterval
	// (plus one iteration) of monotonic time, in every phase.
	for k := 1; k < len(sink.at); k++ {
		if gap := sink.at[k] - sink.at[k-1]; gap > 11*ms {
			t.Fatalf("nothing published for %v (packet %d)", time.Duration(gap), k)
		}
	}
	// Stamps never go back: every header's base time and every record.
	var last int64
	for k, pkt := range sink.published {
		var p wire.Packet
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		if p.BaseTime < last {
			t.Fatalf("packet %d: time %d went back from %d", k, p.BaseTime, last)
		}
		last = p.BaseTime
		var r wire.Record
		for p.Next(&r) {
			if r.Time < last {
				t.Fatalf("seq %d: time %d went back from %d", r.Seq, r.Time, last)
			}
			last = r.Time
		}
	}
	// The wall stepped back an hour: stamps went on at the monotonic rate.
	if d := stamps[1] - stamps[0]; d != 1000*ms {
		t.Fatalf("sequencer time advanced %v during the second after the step back, want 1s", time.Duration(d))
	}
	// The wall stepped forward a day (23h past the stamps): stamps jumped.
	if d := stamps[2] - stamps[1]; d != 23*int64(time.Hour)+1000*ms {
		t.Fatalf("sequencer time advanced %v during the second after the step forward, want 23h0m1s", time.Duration(d))
	}
	// The timer: ten fires a second in each phase, plus the one fire that
	// absorbs the jump; the periods jumped over are skipped and counted.
	if fired[0] != 10 || fired[1] != 10 || fired[2] < 10 || fired[2] > 11 {
		t.Fatalf("timer fired %v per second, want 10, 10 and 10 or 11 (one for the jump)", fired)
	}
	if skipped, want := c.Stats().TimerSkipped, uint64(23*time.Hour/(100*time.Millisecond)); skipped < want-2 || skipped > want {
		t.Fatalf("skipped %d periods, want about %d", skipped, want)
	}
	// Hot-hot: instance 1 went silent when the wall stepped back; instance
	// 2 took over ActiveTimeout (300ms) of monotonic time later.
	if switchedBy < 1300 || switchedBy > 1310 || c.Stats().ActivationSwitch != 1 {
		t.Fatalf("switched at iteration %d (%d switches), want one at about 1300", switchedBy, c.Stats().ActivationSwitch)
	}
	if repairsSent != 2 {
		t.Fatalf("%d repairs", repairsSent)
	}
}

func mustStepAt(t testing.TB, c SinkShell, now Time, f []byte) {
	t.Helper()
	if err := c.Step(now, f, 1); err != nil {
		t.Fatalf("Step: %v", err)
	}
}
