package sequencer

import (
	"time"

	"github.com/seqd/seqd/internal/invariants"
)

// Time is one reading of the shell's two clocks, taken together.
//
// Every timeout of the Core (heartbeats, flush delay, repair pacing,
// multicast repair window, hot-hot activity) runs on Mono. Wall only
// stamps records: the Core's sequencer time follows it forward but never
// goes back (see Core.LastTime), and centralized timers run on that
// sequencer time, because they fire at a point of the stream that every
// node and replay must see alike.
type Time struct {
	// Mono (ns) is a monotonic clock from any origin. A reading below the
	// last one is taken as the last one.
	Mono int64
	// Wall (ns since the Unix epoch) may step back or forward.
	Wall int64
}

// SystemClock returns a clock that reads time.Now once per call: Mono is
// Go's monotonic reading (as the time since SystemClock was called), Wall
// the Unix time. One reading gives both, so a shell reads it once per
// batch of work.
func SystemClock() func() Time {
	base := time.Now()
	return func() Time {
		n := time.Now()
		return Time{Mono: int64(n.Sub(base)), Wall: n.UnixNano()}
	}
}

// advance takes a reading. Mono never goes back. Sequencer time (c.now,
// the stamp) is the largest of the last stamp, the wall clock and the
// stamp at the last anchor plus the monotonic time since: when the wall
// steps back, stamps keep advancing at the monotonic rate from where they
// were (they stay ahead of the wall until it catches up); when the wall
// steps forward, stamps jump with it. The anchor moves whenever the wall is
// at or ahead of that extrapolation. The first reading anchors at the
// larger of the wall and StartTime, so a new primary whose wall is behind
// the old one's last stamp advances from that stamp at once.
func (c *Core) advance(t Time) {
	if invariants.Enabled {
		c.checkInvariants()
	}
	if !c.clockSet {
		c.clockSet = true
		c.mono = t.Mono
		c.lastSend = t.Mono
		c.openedAt = t.Mono
		c.now = max(c.now, t.Wall)
		c.anchorMono, c.anchorStamp = c.mono, c.now
		return
	}
	if t.Mono > c.mono {
		c.mono = t.Mono
	}
	ext := c.anchorStamp + (c.mono - c.anchorMono)
	if t.Wall >= ext {
		c.anchorMono, c.anchorStamp = c.mono, t.Wall
		ext = t.Wall
	}
	if ext > c.now {
		c.now = ext
	}
}
