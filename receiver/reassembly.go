package receiver

import (
	"sort"

	"github.com/seqd/seqd/wire"
)

type slotState uint8

const (
	slotEmpty   slotState = iota
	slotPartial           // some fragments held
	slotFull              // whole message held, waiting for its turn or for stable
)

// span is a held byte range [from, to) of a message being reassembled.
type span struct{ from, to uint32 }

// slot holds one record ahead of delivery, copied out of its packet. buf
// starts as the slot's piece of the ring's arena; a larger record gets an
// owned buffer, counted in the reassembly budget.
type slot struct {
	seq      uint64
	time     int64
	account  wire.Account
	cmdSeq   uint64
	epoch    uint32
	instance uint8
	flags    uint8
	state    slotState
	owned    bool
	total    uint32
	got      uint32 // bytes held
	buf      []byte // len: bytes addressable so far
	small    []byte // the slot's arena piece
	spans    []span
}

// pendingSlotBytes is the payload room each slot gets up front from one
// arena, so that buffering small out-of-order records never allocates.
const pendingSlotBytes = 320

// bigBufferBytes: an owned buffer above this size is released once its
// message is delivered (kept as the spare if it is the largest); smaller
// ones stay in their slot for reuse, still counted in the budget.
const bigBufferBytes = 64 << 10

// aheadSlackBytes bounds how far beyond twice the bytes already held a
// fragment may reach: memory grows with bytes that arrived, never with the
// size a packet declares. The sequencer sends fragments in order, so a
// fragment far ahead is rare; it is dropped and asked for again.
const aheadSlackBytes = 256 << 10

// reassembly is the ring of records held ahead of delivery and the budget
// of their memory.
type reassembly struct {
	ring         []slot
	mask         uint64
	used         int    // bytes of owned buffers (slots and spare)
	spare        []byte // the largest released buffer, for the next big message
	releaseLater []uint64
}

func (r *Receiver) initRing(n int) {
	r.ring = make([]slot, n)
	arena := make([]byte, n*pendingSlotBytes)
	for i := range r.ring {
		s := &r.ring[i]
		s.small = arena[i*pendingSlotBytes : i*pendingSlotBytes : (i+1)*pendingSlotBytes]
		s.buf = s.small
	}
	r.mask = uint64(n - 1)
	r.releaseLater = make([]uint64, 0, 16)
}

func (r *Receiver) resetRing() {
	for i := range r.ring {
		s := &r.ring[i]
		s.state = slotEmpty
		r.discard(s)
	}
	r.used -= cap(r.spare)
	r.spare = nil
	r.releaseLater = r.releaseLater[:0]
}

// release gives an owned buffer back: kept as the spare when it is the
// largest, else dropped.
func (r *Receiver) release(s *slot) {
	if s.owned {
		if cap(s.buf) > cap(r.spare) {
			r.used -= cap(r.spare)
			r.spare = s.buf[:0]
		} else {
			r.used -= cap(s.buf)
		}
		s.owned = false
	}
	s.buf = s.small[:0]
}

// discard frees an owned buffer outright.
func (r *Receiver) discard(s *slot) {
	if s.owned {
		r.used -= cap(s.buf)
		s.owned = false
	}
	s.buf = s.small[:0]
}

// dropSlot empties a slot whose record must be fetched again.
func (r *Receiver) dropSlot(s *slot) {
	s.state = slotEmpty
	r.discard(s)
	if s.seq >= r.next && s.seq <= r.contig {
		r.contig = s.seq - 1 // a slot left from below next loses nothing
	}
}

// held reports whether seq q is held whole in the ring.
func (r *Receiver) held(q uint64) bool {
	if q-r.released >= uint64(len(r.ring)) {
		return false
	}
	s := &r.ring[q&r.mask]
	return s.seq == q && s.state == slotFull
}

// store copies a record that cannot be delivered yet into the ring and
// reports whether it brought bytes not held before.
func (r *Receiver) store(rec *wire.Record, epoch uint32) bool {
	if rec.Seq-r.released >= uint64(len(r.ring)) {
		r.stats.Overflow++
		return false
	}
	s := &r.ring[rec.Seq&r.mask]
	if s.state != slotEmpty && s.seq != rec.Seq {
		r.dropSlot(s) // left over from a seq long delivered or cut
	}
	if s.state == slotFull {
		r.stats.Duplicates++
		return false
	}
	n := uint32(len(rec.Payload))
	if rec.Flags&wire.FlagFragment == 0 {
		s.buf = s.buf[:0]
		if !r.grow(s, n, n, rec.Seq) {
			return false
		}
		s.seq = rec.Seq
		copy(s.buf, rec.Payload)
		s.total, s.got = n, n
		s.state = slotFull
	} else {
		if s.state == slotEmpty {
			s.seq = rec.Seq
			s.total, s.got = rec.Total, 0
			s.spans = s.spans[:0]
			s.buf = s.buf[:0]
			s.state = slotPartial
		} else if s.total != rec.Total {
			r.stats.Malformed++
			return false
		}
		end := rec.Offset + n
		if end > uint32(len(s.buf)) {
			if uint64(end) > 2*uint64(s.got)+aheadSlackBytes {
				r.stats.AheadDrops++
				r.unclaim(s)
				return false
			}
			if !r.grow(s, end, s.total, rec.Seq) {
				r.unclaim(s)
				return false
			}
		}
		var added bool
		s.spans, added = addSpan(s.spans, rec.Offset, end)
		if !added && s.total != 0 {
			r.stats.Duplicates++
			return false
		}
		copy(s.buf[rec.Offset:end], rec.Payload)
		var got uint32
		for _, sp := range s.spans {
			got += sp.to - sp.from
		}
		s.got = got
		if got == s.total {
			s.buf = s.buf[:s.total]
			s.state = slotFull
		}
	}
	r.maxStored = max(r.maxStored, rec.Seq)
	s.time = rec.Time
	s.account = rec.Account
	s.cmdSeq = rec.CmdSeq
	s.epoch = epoch
	s.instance = rec.Instance
	s.flags = rec.Flags &^ wire.FlagFragment
	r.contig = max(r.contig, r.next-1) // messages emitted in this batch are not settled yet
	for {
		if h := &r.hold; h.end != 0 && r.contig+1 == h.start {
			r.contig = h.end - 1 // the held run (hold.go)
			continue
		}
		if r.contig+1-r.released >= uint64(len(r.ring)) {
			break
		}
		x := &r.ring[(r.contig+1)&r.mask]
		if x.state != slotFull || x.seq != r.contig+1 {
			break
		}
		r.contig++
	}
	return true
}

// unclaim empties a slot claimed for a message of which nothing is held.
func (r *Receiver) unclaim(s *slot) {
	if s.state == slotPartial && s.got == 0 {
		s.state = slotEmpty
	}
}

// grow makes s.buf addressable up to need bytes (of a message of total),
// doubling its capacity within the budget; the bytes held are kept. It
// reports false, counted, when the budget cannot make room.
func (r *Receiver) grow(s *slot, need, total uint32, seq uint64) bool {
	if int(need) <= cap(s.buf) {
		s.buf = s.buf[:need]
		return true
	}
	newCap := max(int(need), min(2*cap(s.buf), int(total)))
	var nb []byte
	if cap(r.spare) >= newCap {
		nb, r.spare = r.spare[:need], nil // its bytes stay counted, now in the slot
	} else {
		old := 0
		if s.owned {
			old = cap(s.buf)
		}
		if !r.reserve(newCap-old, seq) {
			r.stats.BudgetDrops++
			return false
		}
		nb = make([]byte, need, newCap)
		r.used += newCap
	}
	copy(nb, s.buf)
	if s.owned {
		r.used -= cap(s.buf)
	}
	s.buf, s.owned = nb, true
	return true
}

// reserve makes room for delta more bytes in the budget: it drops the
// spare, then buffers of empty slots and of records above seq (they are
// asked for again later). The next message to deliver can thus always be
// reassembled, since the budget holds at least the largest message.
func (r *Receiver) reserve(delta int, seq uint64) bool {
	limit := r.cfg.MaxReassemblyBytes
	if r.used+delta <= limit {
		return true
	}
	if r.spare != nil {
		r.used -= cap(r.spare)
		r.spare = nil
		if r.used+delta <= limit {
			return true
		}
	}
	for i := len(r.ring) - 1; i >= 0 && r.used+delta > limit; i-- {
		s := &r.ring[i]
		if !s.owned {
			continue
		}
		if s.state == slotEmpty {
			if s.seq >= r.released && s.seq < r.next {
				continue // viewed by the current Ready
			}
			r.discard(s)
			continue
		}
		if s.seq > seq {
			r.dropSlot(s)
			r.stats.BudgetDrops++
		}
	}
	return r.used+delta <= limit
}

// addSpan merges [from, to) into the sorted, disjoint spans and reports
// whether it added bytes not held before.
func addSpan(sp []span, from, to uint32) ([]span, bool) {
	if from == to {
		return sp, false
	}
	i := sort.Search(len(sp), func(k int) bool { return sp[k].to >= from })
	j := i
	for j < len(sp) && sp[j].from <= to {
		j++
	}
	if j == i+1 && sp[i].from <= from && sp[i].to >= to {
		return sp, false
	}
	if i < j {
		from = min(from, sp[i].from)
		to = max(to, sp[j-1].to)
		sp[i] = span{from, to}
		return append(sp[:i+1], sp[j:]...), true
	}
	sp = append(sp, span{})
	copy(sp[i+1:], sp[i:])
	sp[i] = span{from, to}
	return sp, true
}
