package receiver

import "github.com/seqd/seqd/wire"

// Safe delivery behind a sequencer group: the stable seq a packet carries
// is the quorum's as the primary knew it when it published, always below
// the packet's own records (the standbys ack what they already received),
// so in safe mode every record waits for a later header. Copying each one
// into a ring slot costs a copy and a slot's cache lines per record, which
// made a safe node cost half again as much CPU as a fast one in `seqd bench
// --sequencers 3`. The hold keeps instead the packet that carried an
// in-order run of such records: one copy per packet, sequential in one
// arena, and the records are read out of it again when stable covers
// them, as the hot path reads a live packet (their payloads are views of
// the held copy, valid until Advance).
//
// The hold takes one in-order run at a time: whole records of the current
// epoch, each the seq after the run (or, to start a run, the seq after
// everything held with no gap), while the ring holds nothing at or above
// it (anything else, and everything once the arena or the entry ring is
// full, goes to the ring as before). So the undelivered held seqs are
// exactly [hold.start, hold.end), whole, and the ring holds none of them;
// the ring may hold seqs below the run (a gap repaired before it began)
// and above it (after a gap at its end): drain takes from the ring and
// the hold in turn, whichever holds next.

// heldPacket is one packet held whole: its seqs from..to wait for stable.
type heldPacket struct {
	off, n   int // the copy is buf[off:off+n]
	from, to uint64
	epoch    uint32
}

// hold is the arena of held packets, a ring of variable-size copies, and
// the ring of their entries, oldest first.
type hold struct {
	buf   []byte // allocated on first use: only safe receivers behind a group hold
	ents  []heldPacket
	head  int    // index of the oldest entry
	n     int    // entries in use
	w     int    // where the next copy goes
	start uint64 // first held seq not delivered (while end != 0)
	end   uint64 // one past the last seq held (0 when nothing waits)
	cur   int    // entry of the packet being stepped, -1 before its first held record
	pkt   wire.Packet
	rec   wire.Record
}

// heldPacketBytes sizes the entry ring: one entry per this many arena
// bytes. A packet of the default size (1472 bytes) is bigger, and one of a
// group over UDP with GSO (up to 64 KiB) far bigger, so the arena fills
// first; a stream of packets of one small record each holds fewer
// packets, the rest going to the ring.
const heldPacketBytes = 512

// holdNext is the seq the hold can take next: the one after its run, or,
// with no run, the one after everything held with no gap.
func (r *Receiver) holdNext() uint64 {
	if r.hold.end != 0 {
		return r.hold.end
	}
	return r.contig + 1
}

// inHold reports whether seq q waits in the hold.
func (r *Receiver) inHold(q uint64) bool {
	return r.hold.end != 0 && q >= r.hold.start && q < r.hold.end
}

// holdRecord holds rec, the seq after the run held (see hold), by holding
// the frame that carries it: the packet's first held record copies it.
// It reports false when the hold is full.
func (r *Receiver) holdRecord(frame []byte, rec *wire.Record, epoch uint32) bool {
	h := &r.hold
	if h.cur < 0 {
		if h.cur = r.pushHeld(frame); h.cur < 0 {
			return false
		}
		e := &h.ents[h.cur]
		e.from, e.epoch = rec.Seq, epoch
		r.stats.HeldPackets++
	}
	h.ents[h.cur].to = rec.Seq
	if h.end == 0 {
		h.start = rec.Seq
	}
	h.end = rec.Seq + 1
	if r.contig+1 == rec.Seq {
		r.contig = rec.Seq // else a hole below the run waits for a repair (store jumps the run)
	}
	return true
}

// pushHeld copies frame into the arena as the newest entry and returns its
// index, or -1 when there is no room. Entries delivered before the last
// Advance are reclaimed first.
func (r *Receiver) pushHeld(frame []byte) int {
	h := &r.hold
	for h.n > 0 && h.ents[h.head].to < r.released {
		h.head++
		if h.head == len(h.ents) {
			h.head = 0
		}
		h.n--
	}
	if h.buf == nil {
		h.buf = make([]byte, r.cfg.HoldBytes)
		h.ents = make([]heldPacket, max(16, r.cfg.HoldBytes/heldPacketBytes))
	}
	n := len(frame)
	if h.n == len(h.ents) || n > len(h.buf) {
		return -1
	}
	off := -1
	if h.n == 0 {
		h.head, off = 0, 0
	} else if start := h.ents[h.head].off; h.w >= start {
		// In use: [start, w). Free: [0, start) and [w, len). Back to
		// the arena's start as soon as the room there is twice what is
		// held, and two packets more (the new copies then do not catch
		// up with the old ones being delivered, even when the lag
		// doubles meanwhile): the copies cycle through about three
		// times the bytes held, which stay in the caches, instead of
		// sweeping the whole arena (a 12k-record lag in packets of
		// 1472 bytes took 2-3x longer so).
		if n < start && start >= 2*(h.w-start)+2*n {
			off = 0
		} else if h.w+n <= len(h.buf) {
			off = h.w
		} else if n < start {
			off = 0
		}
	} else if h.w+n < start {
		// Wrapped, in use: [start, len) and [0, w). Free: [w, start),
		// never filled up to start, so that w < start tells it wrapped.
		off = h.w
	}
	if off < 0 {
		return -1
	}
	copy(h.buf[off:off+n], frame)
	h.w = off + n
	i := h.head + h.n
	if i >= len(h.ents) {
		i -= len(h.ents)
	}
	h.ents[i] = heldPacket{off: off, n: n}
	h.n++
	return i
}

// drainHold delivers held records from next on while stable covers them.
func (r *Receiver) drainHold() {
	h := &r.hold
	i := h.head
	for k := 0; k < h.n && r.next <= r.stable && r.next < h.end; k++ {
		e := &h.ents[i]
		if i++; i == len(h.ents) {
			i = 0
		}
		if e.to < r.next {
			continue // delivered: reclaimed after the next Advance
		}
		if e.from > r.next {
			break // next is in the ring, below the run
		}
		p, rec := &h.pkt, &h.rec
		// DecodePacket accepted it when it was held, and nothing writes
		// over the copy: only its header is read again.
		if wire.DecodeCheckedPacket(h.buf[e.off:e.off+e.n], p) != nil {
			panic("receiver: a held packet no longer decodes")
		}
		for p.Next(rec) {
			if rec.Seq < r.next {
				continue
			}
			if rec.Seq > e.to || rec.Seq > r.stable {
				break
			}
			r.emit(rec.Seq, rec.Time, e.epoch, rec.Account, rec.Instance, rec.CmdSeq, rec.Flags, rec.Payload)
		}
		if r.next <= e.to {
			break // stable is inside this packet
		}
	}
	if r.next >= h.end {
		h.end = 0 // every held record delivered: the entries wait only for the next Advance
	} else {
		h.start = max(h.start, r.next)
	}
}

// trimHold drops the held records that a new epoch starting at start cuts
// (see cutBound): they were never stable, and are fetched again if the
// new epoch keeps them.
func (r *Receiver) trimHold(start uint64) {
	h := &r.hold
	if h.end == 0 {
		return
	}
	cut := h.end // first seq dropped
	for h.n > 0 {
		i := h.head + h.n - 1
		if i >= len(h.ents) {
			i -= len(h.ents)
		}
		e := &h.ents[i]
		if e.to < h.start {
			break // delivered
		}
		bound := r.cutBound(e.epoch, start)
		if e.to < bound {
			break
		}
		from := max(bound, e.from, h.start)
		r.stats.DroppedByEpoch += e.to + 1 - from
		cut = from
		if e.from < from {
			e.to = from - 1
			break
		}
		h.w = e.off
		h.n--
	}
	if cut == h.end {
		return
	}
	if cut <= h.start {
		h.end = 0
	} else {
		h.end = cut
	}
	if cut <= r.contig {
		r.contig = max(r.next-1, cut-1)
	}
}

// resetHold forgets everything held.
func (r *Receiver) resetHold() {
	h := &r.hold
	h.n, h.head, h.w, h.end, h.cur = 0, 0, 0, 0, -1
}
