package sequencer

import (
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestCore_OneSendersTimerRateIsBounded: on defaults, one sender asks for
// MaxTimersPerSender (1024) periodic timers at MinTimerPeriod (1ms): a
// million timer records a second. The sequencer takes them only up to
// MaxTimerFiresPerSecond for that sender and rejects the rest in the
// stream (RejectTimerRate, counted), so the node's OnRejected tells it;
// the stream carries about MaxTimerFiresPerSecond firings a second
// (issue 14, item 9).
func TestCore_OneSendersTimerRateIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 1 << 30
	ms := int64(time.Millisecond)
	c, sink := newCore(t, cfg)
	const timers = 1024
	seq := uint64(1)
	for seq <= timers {
		var cmds []wire.Command
		for i := 0; i < 32 && seq <= timers; i++ {
			cmds = append(cmds, timerCmd(t, seq, wire.TimerRequest{ID: seq, At: ms, Period: int64(cfg.MinTimerPeriod)}))
			seq++
		}
		mustStep(t, c, 0, frame(t, acctA, 1, 0, cmds...))
		c.Flush(at(0))
	}
	const window = 100 // ms of sequencer time
	for i := int64(1); i <= window; i++ {
		c.Tick(at(i * ms))
	}
	stream := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	fired, rejected := 0, 0
	for _, m := range stream {
		switch {
		case m.Internal == nil:
		case m.Internal.Type == wire.InternalTimer:
			fired++
		case m.Internal.Type == wire.InternalRejected:
			rejected++
		}
	}
	limit := cfg.MaxTimerFiresPerSecond * window / 1000
	if fired > 2*limit || fired == 0 {
		t.Fatalf("%d timer firings in %dms from one sender (%d rejections); want about %d (MaxTimerFiresPerSecond %d)",
			fired, window, rejected, limit, cfg.MaxTimerFiresPerSecond)
	}
	if st := c.Stats(); rejected == 0 || st.RejectedTimerRate != uint64(rejected) {
		t.Fatalf("%d rejections in the stream, stats %+v", rejected, st)
	}
	for _, m := range stream {
		if m.Internal != nil && m.Internal.Type == wire.InternalRejected && wire.RejectReason(m.Internal.Value) != wire.RejectTimerRate {
			t.Fatalf("rejected for %v, want %v", wire.RejectReason(m.Internal.Value), wire.RejectTimerRate)
		}
	}
}
