package logging

import (
	"sync"
	"time"
)

// MaxKeys bounds a Limiter's table: past it, keys not seen for an
// interval are forgotten, and if none is that old the table starts over
// (a burst of distinct keys then logs each once more, never grows
// memory).
const MaxKeys = 1024

// DefaultInterval is the interval of the libraries' adapters: one line
// per key every 10 s.
const DefaultInterval = 10 * time.Second

// Limiter lets one event per key through per interval. Allow reports
// whether this event should be logged and how many of its key were
// suppressed since the last one that was.
type Limiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*limitEntry
}

type limitEntry struct {
	last       time.Time // when the last logged event of the key was
	suppressed int
}

// NewLimiter is a Limiter of interval; now is the clock (time.Now when
// nil; a test passes its own).
func NewLimiter(interval time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{interval: interval, now: now, keys: map[string]*limitEntry{}}
}

// Allow is true for the first event of key in each interval; suppressed
// is the number of events of key dropped before it.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) {
	if l == nil || l.interval <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) >= MaxKeys {
			l.forget(now)
		}
		l.keys[key] = &limitEntry{last: now}
		return true, 0
	}
	// A clock step back is taken as the interval passing: a line too
	// many is better than a silence too long.
	if d := now.Sub(e.last); d >= l.interval || d < 0 {
		n := e.suppressed
		e.last, e.suppressed = now, 0
		return true, n
	}
	e.suppressed++
	return false, 0
}

// forget drops keys idle for an interval, or all of them.
func (l *Limiter) forget(now time.Time) {
	for k, e := range l.keys {
		if now.Sub(e.last) >= l.interval {
			delete(l.keys, k)
		}
	}
	if len(l.keys) >= MaxKeys {
		clear(l.keys)
	}
}
