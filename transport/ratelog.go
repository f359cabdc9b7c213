package transport

import (
	"log/slog"
	"sync"
	"time"
)

// DefaultLogInterval is how often a RateLog writes at most one line.
const DefaultLogInterval = 10 * time.Second

// RateLog folds repeated events of one kind (refused datagrams, dropped
// connections) into at most one log line per Interval, carrying how many
// happened since the previous line and the last error. A long-running
// process that meets a firewall or a flapping interface would otherwise
// write one line per datagram; the exact totals are in the counters.
//
// The first event is logged at once; later ones are folded into the next
// line, written by the first event at least Interval after the last line.
// Safe from any goroutine. The zero value is ready: it logs to
// slog.Default() every DefaultLogInterval.
type RateLog struct {
	Logger   *slog.Logger  // nil: slog.Default()
	Interval time.Duration // <= 0: DefaultLogInterval
	Msg      string        // the line's message
	Attrs    []any         // extra key-value pairs for every line (who logs)

	mu     sync.Mutex
	count  uint64 // events not yet reported
	total  uint64
	last   error
	lastAt time.Time // when the last line was written
}

// Note records n events, err being the latest, and writes a line if none
// was written in the last Interval. It allocates only when it writes.
func (r *RateLog) Note(n uint64, err error) {
	if n == 0 {
		return
	}
	now := time.Now()
	r.mu.Lock()
	r.count += n
	r.total += n
	if err != nil {
		r.last = err
	}
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultLogInterval
	}
	if !r.lastAt.IsZero() && now.Sub(r.lastAt) < interval {
		r.mu.Unlock()
		return
	}
	count, total, last := r.count, r.total, r.last
	r.count, r.lastAt = 0, now
	r.mu.Unlock()
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	args := make([]any, 0, len(r.Attrs)+8)
	args = append(args, r.Attrs...)
	args = append(args, "count", count, "total", total, "last_err", last, "next_line_after", interval)
	log.Warn(r.Msg, args...)
}

// Total is the number of events noted so far.
func (r *RateLog) Total() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}
