package replayer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/seqd/seqd/wire"
)

// persister feeds a Store from a receiver's Ready.Persist frames. A
// receiver hands over every frame that brought it new records, in the
// order they arrived: a repair comes after the packets that followed the
// hole, and records may not be stable yet. A Store takes packets only in
// stream order and gap-free, and a replayer stores only what is stable
// (stable records are never cut by a failover, so what it serves is
// never taken back, and it never holds a record a later epoch replaced).
// The persister holds frames back until both hold:
//
//   - in order: sorted by first seq (and fragment offset), a frame is
//     appended when it follows the newest packet held;
//   - delivered: its last seq is at or below the receiver's delivered seq
//     (which, in Safe mode, is whole, contiguous and stable).
//
// A packet of an earlier epoch that reaches past a later epoch's start
// (the failover cut it there; the receiver dropped those records and
// delivered the new primary's) is stored without them: see cut.
//
// A frame that can go at once (nothing held back, delivered, next in
// line) is appended from the receiver's view, with no copy. Frames held
// back are copied into buffers recycled through a free list, so a warm
// persister allocates nothing.
//
// It is pure: no clock, no goroutine; the shell calls offer for each
// Ready.Persist frame and drain whenever the delivered seq moved.
type persister struct {
	held     []heldFrame // sorted by (first, off)
	free     [][]byte
	bytes    int // bytes held
	maxBytes int
	// starts are the epoch starts seen in persisted headers, by epoch
	// ascending (at most maxEpochStarts, the newest): a packet of epoch e
	// keeps no record at or past the start of a later epoch (see cut).
	starts []epochStart
	stats  PersistStats
}

// epochStart is one epoch's first seq, as its packets' headers say.
type epochStart struct {
	epoch uint32
	start uint64
}

// maxEpochStarts bounds the persister's table of epoch starts.
const maxEpochStarts = 64

// heldFrame is a frame waiting for its turn.
type heldFrame struct {
	buf   []byte
	first uint64
	last  uint64
	off   uint32 // fragment offset of the first record (0: whole)
}

// PersistStats count what the persister did.
type PersistStats struct {
	Appended   uint64 // packets appended to the store
	Direct     uint64 // of those, appended with no copy
	Duplicates uint64 // frames dropped: the store holds them already
	Cut        uint64 // packets of an earlier epoch stored without the records its successor cut (or dropped)
	HeldMax    int    // most frames held back at once
	Held       int    // frames held back now
	HeldBytes  int    // their bytes
}

func (p *persister) init(maxBytes int) {
	p.maxBytes = maxBytes
	p.held = make([]heldFrame, 0, 64)
}

// offer takes one Ready.Persist frame; delivered is the receiver's
// delivered seq after the step. The frame is only read during the call.
func (p *persister) offer(s *Store, frame []byte, delivered uint64) error {
	info := packetInfo(frame)
	last := info.LastSeq()
	var off uint32
	if info.Fragment {
		off = info.FragFrom
	}
	epoch := le.Uint32(frame[16:])
	p.noteEpoch(epoch, le.Uint64(frame[48:]))
	if len(p.held) == 0 && last <= delivered && !p.cuts(epoch, last) {
		switch err := s.Append(frame); {
		case err == nil:
			p.stats.Appended++
			p.stats.Direct++
			return nil
		case errors.Is(err, ErrDuplicate):
			p.stats.Duplicates++
			return nil
		case !errors.Is(err, ErrGap):
			return err
		}
	}
	return p.hold(frame, info.FirstSeq, last, off)
}

// hold copies frame into the sorted list of held frames.
func (p *persister) hold(frame []byte, first, last uint64, off uint32) error {
	i, found := slices.BinarySearchFunc(p.held, heldFrame{first: first, off: off}, func(a, b heldFrame) int {
		switch {
		case a.first != b.first:
			if a.first < b.first {
				return -1
			}
			return 1
		case a.off != b.off:
			if a.off < b.off {
				return -1
			}
			return 1
		}
		return 0
	})
	if found {
		// The same first record twice: a duplicate, or the packet of a
		// newer epoch at a seq an older epoch's packet also reached (cut
		// there): the newest epoch's wins.
		h := &p.held[i]
		if le.Uint32(frame[16:]) <= le.Uint32(h.buf[16:]) {
			p.stats.Duplicates++
			return nil
		}
		p.bytes -= len(h.buf)
		p.free = append(p.free, h.buf[:0])
		p.held = slices.Delete(p.held, i, i+1)
		p.stats.Duplicates++
	}
	if p.bytes+len(frame) > p.maxBytes {
		waiting := first
		if len(p.held) > 0 {
			waiting = min(waiting, p.held[0].first)
		}
		return fmt.Errorf("%w: %d bytes held waiting for seq %d (MaxPendingBytes %d)", ErrPendingFull, p.bytes, waiting, p.maxBytes)
	}
	buf := p.buffer(len(frame))
	copy(buf, frame)
	p.held = slices.Insert(p.held, i, heldFrame{buf: buf, first: first, last: last, off: off})
	p.bytes += len(frame)
	p.stats.HeldMax = max(p.stats.HeldMax, len(p.held))
	return nil
}

// buffer returns a buffer of n bytes from the free list, or a new one.
func (p *persister) buffer(n int) []byte {
	for k := len(p.free) - 1; k >= 0 && k >= len(p.free)-4; k-- {
		if b := p.free[k]; cap(b) >= n {
			p.free[k] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			return b[:n]
		}
	}
	return make([]byte, n, max(n, 2048))
}

// drain appends the held frames that are next in line and delivered.
func (p *persister) drain(s *Store, delivered uint64) error {
	n := 0
	for n < len(p.held) && p.held[n].last <= delivered {
		h := &p.held[n]
		buf := h.buf
		if epoch := le.Uint32(buf[16:]); p.cuts(epoch, h.last) {
			p.stats.Cut++
			buf = p.cut(buf, epoch)
		}
		var err error
		if buf != nil {
			err = s.Append(buf)
		}
		switch {
		case err == nil:
			if buf != nil {
				p.stats.Appended++
			}
		case errors.Is(err, ErrDuplicate):
			p.stats.Duplicates++
		case errors.Is(err, ErrGap):
			// Everything below h was delivered, so it came through here
			// and is held or stored: the store's hole will never fill.
			p.release(n)
			return fmt.Errorf("%w: the store holds up to seq %d, the next frame the receiver delivered starts at seq %d (offset %d)", ErrHole, s.Contiguous(), h.first, h.off)
		default:
			p.release(n)
			return err
		}
		p.bytes -= len(h.buf)
		p.free = append(p.free, h.buf[:0])
		h.buf = nil
		n++
	}
	p.release(n)
	return nil
}

// release drops the first n held frames (their buffers are recycled).
func (p *persister) release(n int) {
	if n == 0 {
		return
	}
	k := copy(p.held, p.held[n:])
	clear(p.held[k:]) // drop the buffers' references from the old tail
	p.held = p.held[:k]
}

// Stats returns the counters.
func (p *persister) Stats() PersistStats {
	st := p.stats
	st.Held, st.HeldBytes = len(p.held), p.bytes
	return st
}

// noteEpoch records where epoch e starts (from a persisted header).
func (p *persister) noteEpoch(e uint32, start uint64) {
	k := len(p.starts)
	if k > 0 && p.starts[k-1].epoch >= e {
		return // known (or older than the newest: its start came first)
	}
	if k == maxEpochStarts {
		copy(p.starts, p.starts[1:])
		p.starts = p.starts[:k-1]
	}
	p.starts = append(p.starts, epochStart{epoch: e, start: start})
}

// nextStart is the start of the first epoch after e that the persister
// knows: the cut of epoch e (no record of e at or past it survived).
func (p *persister) nextStart(e uint32) (uint64, bool) {
	for i := range p.starts {
		if p.starts[i].epoch > e {
			return p.starts[i].start, true
		}
	}
	return 0, false
}

// cuts reports whether a packet of epoch e ending at last carries records
// a later epoch cut: a failover's new primary started at or below last.
// The receiver dropped those records (it delivered the new epoch's at
// their seqs), so the packet is stored without them.
func (p *persister) cuts(e uint32, last uint64) bool {
	next, ok := p.nextStart(e)
	return ok && last >= next
}

// cut rewrites pkt (a packet of epoch e, owned by the persister) in place
// without its records at or past the next epoch's start, or returns nil
// when none is left. Records follow the header back to back with seqs
// firstSeq, firstSeq+1, ...: the packet's first k records are a prefix
// of its bytes, and only the count changes.
func (p *persister) cut(pkt []byte, e uint32) []byte {
	next, _ := p.nextStart(e)
	first := le.Uint64(pkt[24:])
	if next <= first {
		return nil
	}
	keep := int(next - first)
	off := int(le.Uint16(pkt[4:]))
	for i := 0; i < keep; i++ {
		n := wire.RecordHeaderBytes + int(le.Uint16(pkt[off:]))
		if pkt[off+2]&wire.FlagFragment != 0 {
			n += wire.FragmentHeaderBytes
		}
		off += n
	}
	le.PutUint16(pkt[20:], uint16(keep))
	return pkt[:off]
}
