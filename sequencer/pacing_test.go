package sequencer

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCore_RepairAfterLongIdle: after hours or days without a NAK, the
// repair bucket is full, not overflowed, and a rate below 1000 B/s still
// refills.
func TestCore_RepairAfterLongIdle(t *testing.T) {
	for _, rate := range []int64{1, 999, 256 << 20, 1 << 30} {
		for _, idle := range []time.Duration{time.Second, 10 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
			t.Run(fmt.Sprintf("rate=%d/idle=%v", rate, idle), func(t *testing.T) {
				cfg := testConfig()
				cfg.MaxPacketBytes = 256
				cfg.RetransmitBytesPerSecond = rate
				cfg.NakSourceBytesPerSecond = 0 // the shared bucket alone
				c, sink := newCore(t, cfg)
				for i := 1; i <= 40; i++ {
					mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), strings.Repeat("y", 150))))
				}
				c.Flush(at(100))
				// Drain the bucket: answer NAKs until one is throttled.
				for i := 0; c.Stats().Throttled == 0; i++ {
					if i > 1_000_000 {
						t.Fatal("never throttled")
					}
					mustStep(t, c, 1000, nakFrame(t, testSession, 1, c.Published(), 0))
				}
				sink.sent = nil
				mustStep(t, c, 1000+int64(idle), nakFrame(t, testSession, 1, 1, 0))
				earned := float64(rate) * idle.Seconds()
				if earned >= 256 && len(sink.sent) != 1 {
					t.Fatalf("after %v idle at %d B/s (%.0f bytes earned): %d packets, want 1", idle, rate, earned, len(sink.sent))
				}
				// A fast bucket is full: 100 more whole answers fit its 50ms burst.
				if rate >= 256<<20 {
					throttled := c.Stats().Throttled
					for i := 0; i < 100; i++ {
						mustStep(t, c, 1000+int64(idle), nakFrame(t, testSession, 1, c.Published(), 0))
					}
					if got := c.Stats().Throttled - throttled; got != 0 {
						t.Fatalf("after %v idle at %d B/s: %d of 100 answers throttled, want none", idle, rate, got)
					}
				}
			})
		}
	}
}

// TestTokenBucket_Refill checks the bucket's arithmetic exactly: idle of a
// second to a week, rates from 1 B/s to 1 GiB/s, and the remainder that
// lets slow rates earn over many short intervals.
func TestTokenBucket_Refill(t *testing.T) {
	for _, rate := range []uint64{1, 999, 1 << 30} {
		for _, idle := range []time.Duration{time.Second, 10 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
			burst := max(rate/20, 1472)
			var b tokenBucket
			b.init(rate, burst)
			start := int64(5 * time.Hour) // any origin
			b.refill(start)
			if !b.take(int(burst)) || b.take(1) {
				t.Fatalf("rate %d: a fresh bucket must hold exactly its burst %d", rate, burst)
			}
			b.refill(start + int64(idle))
			// Exact: rate*idle fits 128 bits; compare in float only when huge.
			want := burst
			if e := float64(rate) * idle.Seconds(); e < float64(burst) {
				want = uint64(e)
			}
			if b.tokens != want {
				t.Fatalf("rate %d, idle %v: %d tokens, want %d", rate, idle, b.tokens, want)
			}
		}
	}
	// 999 B/s refilled every millisecond for a second earns 999 bytes,
	// although each millisecond earns less than one.
	var b tokenBucket
	b.init(999, 1472)
	b.refill(0)
	b.take(1472)
	for i := 1; i <= 1000; i++ {
		b.refill(int64(i) * int64(time.Millisecond))
	}
	if b.tokens != 999 {
		t.Fatalf("999 B/s in 1000 steps of 1ms: %d tokens, want 999", b.tokens)
	}
	// Time going back earns nothing and does not break later refills.
	b.refill(0)
	b.refill(int64(time.Second) + int64(time.Second))
	if b.tokens != 1472 {
		t.Fatalf("after a step back and 1s: %d tokens, want the burst", b.tokens)
	}
}
