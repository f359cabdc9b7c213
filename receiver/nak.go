package receiver

import (
	"fmt"

	"github.com/seqd/seqd/wire"
)

// gapEnd is the last seq of the receive window that is known to exist.
func (r *Receiver) gapEnd() uint64 {
	return min(r.tail, r.released+uint64(len(r.ring))-1)
}

// openGap reports the first seq needed and not held whole, if the stream
// says it exists (a fragmented message still arriving at the tail is not
// a gap until something proves it was published whole).
func (r *Receiver) openGap() (uint64, bool) {
	if !r.started || r.contig >= r.tail {
		return 0, false
	}
	from := r.contig + 1
	s := &r.ring[from&r.mask]
	if s.state == slotPartial && s.seq == from && from > r.sealed &&
		len(s.spans) == 1 && s.spans[0].from == 0 {
		return 0, false
	}
	return from, true
}

// updateGap arms the NAK timer of a new gap with a random first delay, or
// disarms it when the gap was repaired (by our NAK or by a repair another
// receiver asked for).
func (r *Receiver) updateGap(now int64) {
	from, ok := r.openGap()
	if !ok {
		if r.nakArmed || r.asked || r.tried > 0 {
			r.nakArmed, r.asked, r.askedWait = false, false, false
			r.clearGone()
			r.src = r.cfg.PreferredSource
		}
		return
	}
	// A hole inside a large message counts as progress when its held
	// prefix grows: the next hole gets a fresh short delay instead of the
	// backoff, else a message with many holes is repaired at NakMaxDelay
	// per hole.
	var off uint32
	if s := &r.ring[from&r.mask]; s.state == slotPartial && s.seq == from && len(s.spans) > 0 && s.spans[0].from == 0 {
		off = s.spans[0].to
	}
	if r.nakArmed && from == r.nakFrom && off == r.nakOff {
		return
	}
	if from != r.nakFrom {
		r.clearGone()
	}
	r.askedWait = false // progress (or a new gap): the deadline starts at the next NAK
	d := int64(r.cfg.NakDelay)
	r.nakArmed = true
	r.nakFrom = from
	r.nakOff = off
	r.nakBackoff = d
	r.nakAt = now + d/2 + int64(r.random()%uint64(d))
	r.stats.Gaps++
}

// sourceTimeoutNaks is how many NAKs a repair source must have left
// unanswered, besides RepairSourceTimeout passing, before it is left for
// the next one. One NAK (or its answer) lost proves nothing; a receiver
// ticked seldom (a process that slept, the simulator's idle seconds)
// sends only one in the whole deadline, and leaving a live source after
// it sent the NAKs back to a source that already said Gone, whose second
// Gone was fatal (sim seed 712 at -commands 2000). Ticked at NextDue, a
// receiver sends many more in RepairSourceTimeout (the backoff is capped
// at NakMaxDelay), so a dead source is still left at its deadline.
const sourceTimeoutNaks = 2

// sendNak asks the current source for the whole region from the first
// missing seq to the last missing one in the window: one outstanding
// request per gap region.
func (r *Receiver) sendNak(now int64) {
	if r.asked && r.askedWait && r.cfg.RepairSources > 0 && now-r.askedAt >= int64(r.cfg.RepairSourceTimeout) &&
		r.askedNaks >= sourceTimeoutNaks {
		// The source asked sent neither repair nor Gone: it is dead,
		// cut off or lost the requests. Ask the next one that has not
		// said Gone (cyclically, so a source that recovers is asked
		// again in its turn; when every other said Gone, this one again).
		r.src = r.nextSource()
		r.asked, r.askedWait = false, false
		r.stats.SourceTimeouts++
		r.stats.SourceSwitches++
		r.nakBackoff = int64(r.cfg.NakDelay)
	}
	from := r.nakFrom
	to := r.gapEnd()
	for to > from {
		if r.inHold(to) {
			to = r.hold.start - 1
			continue
		}
		s := &r.ring[to&r.mask]
		if s.state != slotFull || s.seq != to {
			break
		}
		to--
	}
	// For a large message partly held, ask for its first hole only: the
	// bytes after the held prefix up to the next held range. Asking for
	// everything after the prefix would resend what is already here.
	var off, end uint32
	if s := &r.ring[from&r.mask]; s.state == slotPartial && s.seq == from && len(s.spans) > 0 {
		next := 0
		if s.spans[0].from == 0 {
			off = s.spans[0].to
			next = 1
		}
		if next < len(s.spans) {
			end = s.spans[next].from
			to = from
		}
	}
	n := wire.Nak{Epoch: r.epoch, Session: r.session, FromSeq: from, ToSeq: to, FromOffset: off, ToOffset: end}
	if _, err := wire.AppendNak(r.queue(r.src, wire.NakBytes), &n); err == nil {
		r.stats.NaksSent++
		if !r.askedWait {
			r.askedWait, r.askedAt, r.askedNaks = true, now, 0
		}
		r.askedNaks++
		if !r.asked {
			r.asked, r.askedFrom, r.askedTo = true, from, to
		} else {
			r.askedFrom, r.askedTo = min(r.askedFrom, from), max(r.askedTo, to)
		}
	}
	r.nakAt = now + r.nakBackoff
	r.nakBackoff = min(2*r.nakBackoff, int64(r.cfg.NakMaxDelay))
}

// clearGone forgets which sources said Gone (a new gap).
func (r *Receiver) clearGone() {
	r.tried = 0
	r.goneSrcs = [4]uint64{}
}

// nextSource is the source after src (cyclically) that has not said Gone
// for this gap; src itself when every other did.
func (r *Receiver) nextSource() Source {
	n := r.cfg.RepairSources + 1
	for i := 1; i < n; i++ {
		s := Source((int(r.src) + i) % n)
		if r.goneSrcs[s/64]&(uint64(1)<<(s%64)) == 0 {
			return s
		}
	}
	return r.src
}

// onGone handles a source's answer that it no longer holds what was
// asked. It is honoured only from the source asked, in the current epoch
// and session, for a range this receiver asked; then the next repair
// source that has not said Gone is asked at once, and when every distinct
// source said Gone the receiver stops with ErrUnrecoverable naming the
// whole missing range.
func (r *Receiver) onGone(now int64, from Source) {
	g := &r.gone
	if !r.started || g.Session != r.session || g.Epoch != r.epoch || from != r.src ||
		!r.asked || g.FromSeq < r.askedFrom || g.ToSeq > r.askedTo {
		r.stats.GoneIgnored++
		return
	}
	first, ok := r.openGap()
	if !ok || g.Oldest != 0 && first >= g.Oldest {
		return // stale: nothing needed is lost
	}
	if w, b := r.src/64, uint64(1)<<(r.src%64); r.goneSrcs[w]&b == 0 {
		r.goneSrcs[w] |= b
		r.tried++
	}
	// Only a Gone from every distinct source is fatal: a source that
	// timed out (a replayer down for a while) may come back, and asking
	// the sequencer again after its Gone proves nothing new.
	if r.tried <= r.cfg.RepairSources {
		r.src = r.nextSource()
		r.asked, r.askedWait = false, false
		r.stats.SourceSwitches++
		r.nakArmed = true
		r.nakAt = now
		r.nakBackoff = int64(r.cfg.NakDelay)
		return
	}
	// The whole range lost: from the first missing seq up to the oldest
	// the source still holds (or the tail), stopping at a seq held here.
	// Nothing is held beyond the ring window, so the walk is bounded.
	limit := r.tail
	if g.Oldest != 0 && g.Oldest-1 < limit {
		limit = g.Oldest - 1
	}
	to := first
	for to < limit {
		if to+1-r.released >= uint64(len(r.ring)) {
			to = limit
			break
		}
		if r.held(to+1) || r.inHold(to+1) {
			break
		}
		to++
	}
	name := "sequencer"
	if r.src != Sequencer {
		name = fmt.Sprintf("repair source %d", r.src)
	}
	if g.Oldest == 0 {
		r.fail(fmt.Errorf("%w: seqs %d..%d no longer retained by %s (nothing retained)", ErrUnrecoverable, first, to, name))
		return
	}
	r.fail(fmt.Errorf("%w: seqs %d..%d no longer retained by %s (oldest %d)", ErrUnrecoverable, first, to, name, g.Oldest))
}
