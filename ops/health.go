package ops

import (
	"fmt"
	"sync"
	"time"
)

// DefaultStall is how long a loop may go without a turn before its
// process is not live: far above any idle wait (a loop turns at least
// every 100 ms, a sequencer heartbeats at least every 50 ms by default).
const DefaultStall = 5 * time.Second

// ProgressLive is a liveness check for a loop that counts its turns:
// live while read's value changes at least once every stall (the first
// call is live). what names the loop in the reason. Safe from any
// goroutine.
func ProgressLive(what string, read func() uint64, stall time.Duration) func() error {
	var (
		mu     sync.Mutex
		last   uint64
		moved  time.Time
		primed bool
	)
	return func() error {
		v := read()
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if !primed || v != last {
			last, moved, primed = v, now, true
			return nil
		}
		if d := now.Sub(moved); d > stall {
			return fmt.Errorf("ops: not live: %s has not turned for %v", what, d.Round(time.Millisecond))
		}
		return nil
	}
}
