package replayer

import (
	"errors"
	"fmt"

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
// back wait in a Reorder (copies in recycled buffers), so a warm
// persister allocates nothing.
//
// It is pure: no clock, no goroutine; the shell calls offer for each
// Ready.Persist frame and drain whenever the delivered seq moved.
type persister struct {
	held Reorder
	// starts are the epoch starts seen in persisted headers: a packet of
	// epoch e keeps no record at or past the start of a later epoch (see
	// cut).
	starts EpochStarts
	stats  PersistStats
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

func (p *persister) init(maxBytes int) { p.held.Init(maxBytes) }

// offer takes one Ready.Persist frame; delivered is the receiver's
// delivered seq after the step. The frame is only read during the call.
func (p *persister) offer(s *Store, frame []byte, delivered uint64) error {
	info := packetInfo(frame)
	last := info.LastSeq()
	epoch := packetEpoch(frame)
	p.starts.Add(epoch, le.Uint64(frame[48:]))
	if p.held.Len() == 0 && last <= delivered && !p.cuts(epoch, last) {
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
	return p.hold(frame, info.FirstSeq)
}

// hold copies frame into the Reorder.
func (p *persister) hold(frame []byte, first uint64) error {
	same, err := p.held.Put(frame)
	if same {
		// The same first record twice: a duplicate, or the packet of a
		// newer epoch at a seq an older epoch's packet also reached (cut
		// there): the newest epoch's wins.
		p.stats.Duplicates++
	}
	if errors.Is(err, ErrPendingFull) {
		waiting := first
		if p.held.Len() > 0 {
			waiting = min(waiting, p.held.First().FirstSeq)
		}
		return fmt.Errorf("%w: %d bytes held waiting for seq %d (MaxPendingBytes %d)", err, p.held.Bytes(), waiting, p.held.maxBytes)
	}
	if err != nil {
		return err
	}
	p.stats.HeldMax = max(p.stats.HeldMax, p.held.Len())
	return nil
}

// drain appends the held frames that are next in line and delivered.
func (p *persister) drain(s *Store, delivered uint64) error {
	for p.held.Len() > 0 {
		h := p.held.First()
		if h.LastSeq > delivered {
			return nil
		}
		buf := h.Frame
		if p.cuts(h.Epoch, h.LastSeq) {
			p.stats.Cut++
			buf = p.cut(buf, h.Epoch)
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
			return fmt.Errorf("%w: the store holds up to seq %d, the next frame the receiver delivered starts at seq %d (offset %d)", ErrHole, s.Contiguous(), h.FirstSeq, h.Offset)
		default:
			return err
		}
		p.held.Drop()
	}
	return nil
}

// Stats returns the counters.
func (p *persister) Stats() PersistStats {
	st := p.stats
	st.Held, st.HeldBytes = p.held.Len(), p.held.Bytes()
	return st
}

// cuts reports whether a packet of epoch e ending at last carries records
// a later epoch cut: a failover's new primary started at or below last.
// The receiver dropped those records (it delivered the new epoch's at
// their seqs), so the packet is stored without them.
func (p *persister) cuts(e uint32, last uint64) bool {
	next, ok := p.starts.After(e)
	return ok && last >= next
}

// cut rewrites pkt (a packet of epoch e, held in the Reorder) in place
// without its records at or past the next epoch's start, or returns nil
// when none is left. Records follow the header back to back with seqs
// firstSeq, firstSeq+1, ...: the packet's first k records are a prefix
// of its bytes, and only the count changes.
func (p *persister) cut(pkt []byte, e uint32) []byte {
	next, _ := p.starts.After(e)
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
