package transport

import (
	"runtime"
	"time"
)

// YieldInterval is how often a busy polling loop passes through the Go
// scheduler (Yield): well under the runtime's 10 ms.
const YieldInterval = 5 * time.Millisecond

// gosched is runtime.Gosched; tests count the calls.
var gosched = runtime.Gosched

// Yield makes a busy polling loop pass through the Go scheduler every
// YieldInterval (runtime.Gosched), and an idle one never.
//
// Why: a loop that only ever blocks in system calls (epoll_wait, recvmmsg,
// sendmmsg) on the raw sockets of multicast or tcp is never rescheduled,
// and the runtime's sysmon takes a goroutine that has not been for 10 ms
// for a long runner: from then on, at each of its ticks (every 20 us while
// it finds work) it takes the P away from the loop's thread whenever that
// thread is in a system call, and the loop, on its way out of epoll_wait,
// must find an idle P and wake sysmon from its sleep before it can read
// the frame that woke it. In `seqd bench --mode rtt` that was a futex wake
// of another thread in every 25th round trip or so of each process (about
// 2500 a run of 30000 round trips; 1100 with the yields, most of them
// the yields' own). A yield costs about one wake-up of another thread
// (the runtime starts one spinning for the goroutine it queued), and is
// paid only in stretches of YieldInterval or more of continuous work.
//
// The zero value is ready; a Yield belongs to one loop.
type Yield struct {
	// prev is the previous iteration's reading, since the first of the
	// current busy stretch (iterations less than YieldInterval apart),
	// last the last yield's.
	prev, since, last int64
	count             uint64
}

// Maybe is called once per loop iteration with the loop's monotonic clock
// reading (ns). It yields when the loop has been busy (every iteration
// less than YieldInterval after the one before) for YieldInterval and the
// last yield is at least YieldInterval old; it reports whether it did. An
// idle loop, even one that goes round twice per wake-up, never yields.
func (y *Yield) Maybe(now int64) bool {
	if now-y.prev >= int64(YieldInterval) {
		y.since = now // after a pause: a new busy stretch, perhaps
	}
	y.prev = now
	if now-y.since < int64(YieldInterval) || now-y.last < int64(YieldInterval) {
		return false
	}
	y.last = now
	y.count++
	gosched()
	return true
}

// Count is how many times Maybe yielded (the loop's goroutine only).
func (y *Yield) Count() uint64 { return y.count }
