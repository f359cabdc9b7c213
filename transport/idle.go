package transport

import "time"

// Idle is the idle strategy of a polling loop: how long its next Poll may
// block. With Spin > 0 the loop keeps polling without blocking for Spin
// after the last frame it saw (busy polling, as Aeron's spinning idle
// strategies do), so a reply that comes back within that time is read
// without a wake-up from the kernel; this buys latency with a core. With
// Spin == 0 the loop blocks at once. The zero value blocks.
type Idle struct {
	Spin time.Duration
	last time.Time
}

// Wait returns how long the next Poll may block, given how many frames
// the last one returned and the longest wait the loop allows.
func (i *Idle) Wait(got int, longest time.Duration) time.Duration {
	if i.Spin <= 0 {
		return longest
	}
	now := time.Now()
	if got > 0 {
		i.last = now
		return 0
	}
	if now.Sub(i.last) < i.Spin {
		return 0
	}
	return longest
}
