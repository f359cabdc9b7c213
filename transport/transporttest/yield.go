package transporttest

import (
	"testing"
	"time"
)

// YieldCase is one loop of a BusyLoopYieldsToTheScheduler test: a Run
// loop driven on a fake clock that moves Step per iteration, 2000
// iterations, must pass through the Go scheduler (transport.Yield) between
// Min and Max times.
type YieldCase struct {
	Step     time.Duration // fake time per loop iteration (or clock reading)
	Min, Max uint64
}

// YieldCases are the two loops every Run loop that blocks in system calls
// is tested with: iterations 100 us apart (2000 of them, 200 ms of fake
// time or a little more) yield about once per transport.YieldInterval;
// iterations 50 ms apart are idle between them and never yield.
var YieldCases = []YieldCase{
	{100 * time.Microsecond, 30, 41},
	{50 * time.Millisecond, 0, 0},
}

// Check fails t when yields is outside [Min, Max]; elapsed is the fake
// time the loop ran, for the message.
func (c YieldCase) Check(t testing.TB, yields uint64, elapsed time.Duration) {
	t.Helper()
	if yields < c.Min || yields > c.Max {
		t.Errorf("step %v: %d yields in %v of fake time, want %d..%d", c.Step, yields, elapsed, c.Min, c.Max)
	}
}
