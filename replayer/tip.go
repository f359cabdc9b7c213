package replayer

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/seqd/seqd/internal/vfs"
)

// Tip is the part of a Store that other goroutines may read while the
// Store's own goroutine appends: where the bytes handed to the operating
// system end. A Reader (any goroutine) reads the segment files read-only
// up to it, so readers never touch the Store itself and need no lock.
//
// The position packs the active segment's ordinal and its written offset
// into one uint64 (ordinal<<positionOffsetBits | offset), published with
// one atomic store after each write: a reader that loads it sees every
// byte before it in the file (the write system call returned before the
// store) and knows that every segment of a lower ordinal is complete
// (a segment is flushed whole before the next one is created).
type Tip struct {
	dir       string
	fs        vfs.FS // the store's: readers open the segments on it
	maxPacket int

	pos     atomic.Uint64 // ordinal<<positionOffsetBits | offset; 0 before the first write
	seq     atomic.Uint64 // highest seq held whole in the bytes before pos
	session atomic.Uint64
	closed  atomic.Bool
	// epochs is the store's epoch table (a copy per change: epochs are
	// rare), stored before the frames that need it are published, so a
	// Reader skips the records a failover cut as the Store does.
	epochs atomic.Pointer[[]Epoch]

	// Followers at the tip wait on a channel each (Wake) instead of
	// polling it with sleeps: publish signals them.
	wmu     sync.Mutex // guards waiters
	waiters []chan struct{}
	nwait   atomic.Int32
}

// Wake returns a channel that gets a signal (it holds one at most) each
// time the tip moves or closes, and the function that stops it. A
// follower that found nothing to read waits on it: a signal sent
// between its read and its wait is not lost. Safe from any goroutine.
func (t *Tip) Wake() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	t.wmu.Lock()
	t.waiters = append(t.waiters, c)
	t.nwait.Store(int32(len(t.waiters)))
	t.wmu.Unlock()
	return c, func() {
		t.wmu.Lock()
		defer t.wmu.Unlock()
		for i, w := range t.waiters {
			if w == c {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				break
			}
		}
		t.nwait.Store(int32(len(t.waiters)))
	}
}

// signal wakes the followers waiting on the tip (no allocation; nothing
// when none waits).
func (t *Tip) signal() {
	if t.nwait.Load() == 0 {
		return
	}
	t.wmu.Lock()
	for _, c := range t.waiters {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	t.wmu.Unlock()
}

// positionOffsetBits: offsets within a segment (Config.SegmentBytes is at
// most 1<<40) fit the low bits, the ordinal the rest (segments up to
// 1<<24; a store rolls that many segments only after 2^24 * SegmentBytes).
const positionOffsetBits = 40

func packPosition(ordinal uint64, off int64) uint64 {
	return ordinal<<positionOffsetBits | uint64(off)
}

func unpackPosition(p uint64) (ordinal uint64, off int64) {
	return p >> positionOffsetBits, int64(p & (1<<positionOffsetBits - 1))
}

// Seq is the highest seq whose frames, and every frame before them, were
// handed to the operating system: what a Reader can read now. Safe from
// any goroutine.
func (t *Tip) Seq() uint64 { return t.seq.Load() }

// Session is the session held (0 while the store is empty). Safe from any
// goroutine.
func (t *Tip) Session() uint64 { return t.session.Load() }

// Closed reports whether the Store was closed: a Reader at the tip will
// see no more. Safe from any goroutine.
func (t *Tip) Closed() bool { return t.closed.Load() }

// Dir is the store's directory.
func (t *Tip) Dir() string { return t.dir }

// publish is called by the Store's goroutine after bytes reached the
// file: segment ordinal is written up to off, and holds seq whole.
func (t *Tip) publish(ordinal uint64, off int64, seq, session uint64) {
	if session != 0 && t.session.Load() != session {
		t.session.Store(session)
	}
	t.seq.Store(seq)
	t.pos.Store(packPosition(ordinal, off))
	t.signal()
}

// publishEpochs hands a copy of the epoch table to readers (Store
// goroutine, on each new epoch).
func (t *Tip) publishEpochs(e []Epoch) {
	c := append([]Epoch(nil), e...)
	t.epochs.Store(&c)
}

// cutFrom is cutFromTable on the published table.
func (t *Tip) cutFrom(h uint32) uint64 {
	p := t.epochs.Load()
	if p == nil {
		return math.MaxUint64
	}
	return cutFromTable(*p, h)
}

// Tip returns the Store's tip, which other goroutines may use (with
// NewReader) for as long as the process runs; it outlives Close.
func (s *Store) Tip() *Tip { return s.tip }

// publishTip publishes the active segment's written end (Store goroutine).
func (s *Store) publishTip() {
	if len(s.segs) == 0 {
		return
	}
	seg := &s.segs[len(s.segs)-1]
	seq := s.tail.contiguous()
	if len(s.wbuf) > 0 {
		// Frames still wait in the buffer: only what precedes them is in
		// the file.
		seq = min(seq, s.pendSeq-1)
	}
	if s.limit != 0 {
		seq = min(seq, s.limit-1)
	}
	s.tip.publish(seg.ordinal, seg.written, seq, s.session)
}
