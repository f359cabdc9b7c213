package inventory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Flusher writes batches to a Store on a goroutine of its own, so the
// handler never waits for the database: the handler fills a free batch
// when one is free (TryHandOff) and goes on; while the database is
// busy, changes accumulate in the State (a key changed many times is
// written once, with its last value). Two batches circulate: one being
// written, one being filled.
type Flusher struct {
	store Store
	free  chan *Batch
	full  chan *Batch
	done  chan struct{}
	once  sync.Once

	err     atomic.Pointer[error]
	flushed atomic.Uint64 // the seq the database holds

	// Counters for reports (written by the flusher goroutine).
	batches atomic.Uint64
	rows    atomic.Uint64 // stock rows and orders written
	busyNs  atomic.Int64  // time spent in Store.Write
}

// NewFlusher starts a Flusher on store. flushed is the seq the store
// already holds.
func NewFlusher(store Store, flushed uint64) *Flusher {
	f := &Flusher{store: store, free: make(chan *Batch, 2), full: make(chan *Batch, 2), done: make(chan struct{})}
	f.flushed.Store(flushed)
	f.free <- &Batch{}
	f.free <- &Batch{}
	go f.run()
	return f
}

func (f *Flusher) run() {
	defer close(f.done)
	for b := range f.full {
		if f.err.Load() == nil {
			t0 := time.Now()
			err := f.store.Write(context.Background(), b)
			f.busyNs.Add(int64(time.Since(t0)))
			if err != nil {
				f.err.CompareAndSwap(nil, &err)
			} else {
				f.flushed.Store(b.Seq)
				f.batches.Add(1)
				f.rows.Add(uint64(len(b.Keys) + len(b.Orders)))
			}
		}
		f.free <- b
	}
}

// TryHandOff moves s's pending changes into a free batch and queues it,
// if a batch is free; it never waits. It reports whether it did.
func (f *Flusher) TryHandOff(s *State) bool {
	if !s.Pending() {
		return true
	}
	select {
	case b := <-f.free:
		s.TakeBatch(b)
		f.full <- b // never blocks: at most two batches exist
		return true
	default:
		return false
	}
}

// Close hands off what s still holds, waits until the database has it,
// stops the goroutine and reports the first write error. s may be nil.
func (f *Flusher) Close(s *State) error {
	f.once.Do(func() {
		if s != nil && s.Pending() {
			b := <-f.free
			s.TakeBatch(b)
			f.full <- b
		}
		close(f.full)
	})
	<-f.done
	return f.Err()
}

// Err is the first write error (the Flusher stops writing after it).
func (f *Flusher) Err() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Flushed is the seq the database holds.
func (f *Flusher) Flushed() uint64 { return f.flushed.Load() }

// FlushStats are the Flusher's counters.
type FlushStats struct {
	Batches uint64
	Rows    uint64 // stock rows and orders written
	Busy    time.Duration
}

// Stats reads the counters (safe from any goroutine).
func (f *Flusher) Stats() FlushStats {
	return FlushStats{Batches: f.batches.Load(), Rows: f.rows.Load(), Busy: time.Duration(f.busyNs.Load())}
}
