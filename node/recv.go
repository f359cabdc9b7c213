package node

import (
	"fmt"
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
// is reused across the seqs that map to the slot; big reassembly buffers
// go back to Core.spareBig after delivery so memory stays bounded.
type slot struct {
	seq      uint64
	time     int64
	account  wire.Account
	cmdSeq   uint64
	epoch    uint32
	instance uint8
	flags    uint8
	state    slotState
	total    uint32
	buf      []byte
	spans    []span
}

// bigBufferBytes is the size above which a reassembly buffer is handed
// back to the spare instead of staying in its slot.
const bigBufferBytes = 64 << 10

// recv is the receiving half of Core.
type recv struct {
	started        bool // a stream packet fixed session, epoch and start
	session        uint64
	epoch          uint32
	next           uint64 // next seq to deliver
	maxStored      uint64 // highest seq ever copied into the ring
	contig         uint64 // every seq in [next, contig] is held whole
	tail           uint64 // highest seq known to exist
	sealed         uint64 // highest seq known to be published whole (all fragments)
	stable         uint64
	firstLive      uint64
	now            int64  // sequencer time
	deliveredEpoch uint32 // newest epoch whose EpochStart this node delivered

	ring     []slot
	mask     uint64
	spareBig []byte

	nakArmed   bool
	nakFrom    uint64
	nakAt      int64
	nakBackoff int64
	nakOff     uint32 // held prefix of nakFrom when the gap was armed
	nakBuf     [wire.NakBytes]byte
}

// pendingSlotBytes is the payload room each pending slot gets up front
// from one arena, so that buffering small out-of-order records never
// allocates, not even the first time a slot is used. Larger records grow
// their slot's buffer once, and it stays grown.
const pendingSlotBytes = 320

func (c *Core) initRecv() {
	c.ring = make([]slot, c.cfg.PendingRecords)
	arena := make([]byte, len(c.ring)*pendingSlotBytes)
	for i := range c.ring {
		c.ring[i].buf = arena[i*pendingSlotBytes : i*pendingSlotBytes : (i+1)*pendingSlotBytes]
	}
	c.mask = uint64(c.cfg.PendingRecords - 1)
	c.next = 1
}

func (c *Core) onPacket(now int64) {
	p := &c.pkt
	if c.started && c.cfg.Session == 0 && p.Session > c.session {
		// Session ids grow (they are start times): the sequencer was
		// restarted, or a second one publishes on this group. Either way
		// this node's stream has ended; going on silently would hang.
		c.fail(fmt.Errorf("%w: session %d appeared while following session %d: the sequencer restarted or another sequencer publishes on this channel; restart the node to follow the new session",
			ErrNewSession, p.Session, c.session))
		return
	}
	if c.cfg.Session != 0 && p.Session != c.cfg.Session ||
		c.started && (p.Session != c.session || p.Epoch < c.epoch) {
		c.stats.Fenced++
		return
	}
	if !c.started {
		if p.Flags&wire.PacketRetransmit != 0 {
			// A repair meant for another receiver says nothing about
			// where the live stream is; wait for a live packet.
			c.stats.Duplicates += uint64(p.Count)
			return
		}
		c.start(p)
	} else if p.Epoch > c.epoch {
		c.newEpoch(p.Epoch, p.EpochStart)
		if c.err != nil {
			return
		}
	}
	if p.Stable > c.stable {
		c.stable = p.Stable
	}
	last := p.LastSeq()
	if last > c.tail {
		c.tail = last
	}
	sealed := last
	if p.Count > 0 {
		// The last record may be one fragment of a message still being
		// published; only the seqs before it are surely whole.
		sealed--
	}
	sealed = max(sealed, c.stable)
	if sealed > c.sealed {
		c.sealed = sealed
	}
	if c.stable > c.tail {
		c.tail = c.stable
	}

	c.drain()
	for c.err == nil && p.Next(&c.rec) {
		r := &c.rec
		if r.Seq < c.next {
			c.duplicate(r)
			continue
		}
		if r.Seq == c.next && r.Flags&wire.FlagFragment == 0 && (c.cfg.Mode == Fast || r.Seq <= c.stable) {
			// In order and deliverable: zero-copy from the packet. A
			// copy stored earlier (out of order) must not be delivered
			// again; only seqs at or below maxStored can have one, which
			// spares the hot path a cache miss in the ring.
			if r.Seq <= c.maxStored {
				if s := &c.ring[r.Seq&c.mask]; s.seq == r.Seq {
					s.state = slotEmpty
				}
			}
			c.deliver(r.Seq, r.Time, p.Epoch, r.Account, r.Instance, r.CmdSeq, r.Flags, r.Payload)
			continue
		}
		c.store(r, p.Epoch)
	}
	c.drain()
	c.ackHeldFragments()
	if p.Kind == wire.KindHeartbeat && c.next == p.FirstSeq && p.BaseTime > c.now {
		c.now = p.BaseTime
	}
	c.updateGap(now)
}

func (c *Core) start(p *wire.Packet) {
	c.started = true
	c.session = p.Session
	c.epoch = p.Epoch
	c.firstLive = p.FirstSeq
	if !c.cfg.Rewind {
		c.next = p.FirstSeq
		c.deliveredEpoch = p.Epoch
	} else if c.cfg.RewindFrom > 1 {
		c.next = c.cfg.RewindFrom
		c.deliveredEpoch = p.Epoch
	}
	c.contig = c.next - 1
	c.tail = c.next - 1
}

// newEpoch fences the old epoch, which the failover cut at start-1 (every
// header of epoch e carries start). A node that delivered seqs at or above
// start in an older epoch has diverged, whether or not it saw the
// EpochStart record itself. Buffered records above the old stable may
// have been cut, so they are dropped and fetched again from the new
// primary if they survived.
func (c *Core) newEpoch(e uint32, start uint64) {
	if c.next > start && c.deliveredEpoch < e {
		c.fail(fmt.Errorf("%w: epoch %d starts at seq %d but seqs up to %d were delivered in epoch %d",
			ErrDiverged, e, start, c.next-1, c.deliveredEpoch))
		return
	}
	c.epoch = e
	from := max(c.next, min(c.stable+1, start))
	end := c.next + uint64(len(c.ring))
	for q := from; q < end; q++ {
		s := &c.ring[q&c.mask]
		if s.state != slotEmpty && s.seq == q && s.epoch < e {
			s.state = slotEmpty
			c.stats.DroppedByEpoch++
		}
	}
	c.contig = max(c.next-1, min(c.contig, c.stable))
	c.tail = max(c.next-1, c.stable)
	c.sealed = min(c.sealed, c.tail)
	c.nakArmed = false
}

// duplicate handles a record already delivered. It is also where a fast
// node learns that a new epoch started at or below what it delivered.
func (c *Core) duplicate(r *wire.Record) {
	c.stats.Duplicates++
	if r.Flags&wire.FlagInternal == 0 || wire.DecodeInternal(r.Payload, &c.ix) != nil {
		return
	}
	if c.ix.Type == wire.InternalEpochStart && c.ix.Epoch > c.deliveredEpoch {
		c.fail(fmt.Errorf("%w: epoch %d starts at seq %d but seqs up to %d were delivered in epoch %d",
			ErrDiverged, c.ix.Epoch, r.Seq, c.next-1, c.deliveredEpoch))
	}
}

// ackHeldFragments acknowledges this node's own large command as soon as
// any fragment of it is held and stable, without waiting for the rest to
// be repaired: the sequencer numbers a command only once it has all of
// it, so a fragment in the stream proves the command made it. Otherwise
// a repair that outlasts ResendInterval would make the node send the
// whole command again (megabytes) while its echo is being repaired. Only
// stable fragments count (a failover may cut the rest), and only after
// this incarnation was announced (older incarnations reuse cmdSeqs).
func (c *Core) ackHeldFragments() {
	if c.cfg.ReadOnly || c.next > c.maxStored || !c.announced {
		return
	}
	s := &c.ring[c.next&c.mask]
	if s.seq == c.next && s.state == slotPartial && s.seq <= c.stable {
		c.observe(s.seq, s.account, s.instance, s.cmdSeq, s.flags|wire.FlagFragment, nil, nil)
	}
}

// store copies a record that cannot be delivered yet into the ring.
func (c *Core) store(r *wire.Record, epoch uint32) {
	if r.Seq-c.next >= uint64(len(c.ring)) {
		c.stats.Overflow++
		return
	}
	c.maxStored = max(c.maxStored, r.Seq)
	s := &c.ring[r.Seq&c.mask]
	if s.state != slotEmpty && s.seq != r.Seq {
		s.state = slotEmpty
	}
	if s.state == slotFull {
		c.stats.Duplicates++
		return
	}
	if r.Flags&wire.FlagFragment == 0 {
		s.buf = append(s.buf[:0], r.Payload...)
		s.total = uint32(len(r.Payload))
		s.state = slotFull
	} else {
		if s.state == slotEmpty {
			if int64(r.Total) > int64(c.cfg.MaxMessageBytes) {
				c.fail(fmt.Errorf("%w: seq %d is %d bytes, MaxMessageBytes is %d", ErrTooLarge, r.Seq, r.Total, c.cfg.MaxMessageBytes))
				return
			}
			c.reserve(s, r.Total)
			s.total = r.Total
			s.spans = s.spans[:0]
			s.state = slotPartial
		} else if s.total != r.Total {
			c.stats.Malformed++
			return
		}
		end := r.Offset + uint32(len(r.Payload))
		var added bool
		s.spans, added = addSpan(s.spans, r.Offset, end)
		if !added && s.total != 0 {
			c.stats.Duplicates++
			return
		}
		copy(s.buf[r.Offset:end], r.Payload)
		if s.total == 0 || len(s.spans) == 1 && s.spans[0].from == 0 && s.spans[0].to == s.total {
			s.state = slotFull
		}
	}
	s.seq = r.Seq
	s.time = r.Time
	s.account = r.Account
	s.cmdSeq = r.CmdSeq
	s.epoch = epoch
	s.instance = r.Instance
	s.flags = r.Flags &^ wire.FlagFragment
	for c.contig+1-c.next < uint64(len(c.ring)) {
		n := &c.ring[(c.contig+1)&c.mask]
		if n.state != slotFull || n.seq != c.contig+1 {
			break
		}
		c.contig++
	}
}

// reserve gives s a buffer of total bytes, reusing the spare big buffer.
func (c *Core) reserve(s *slot, total uint32) {
	n := int(total)
	if cap(s.buf) < n {
		if cap(c.spareBig) >= n {
			s.buf, c.spareBig = c.spareBig, nil
		} else {
			s.buf = make([]byte, n)
		}
	}
	s.buf = s.buf[:n]
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

// drain delivers held records from next on while they are whole and, in
// safe mode, stable.
func (c *Core) drain() {
	for c.err == nil {
		s := &c.ring[c.next&c.mask]
		if s.state != slotFull || s.seq != c.next || c.cfg.Mode == Safe && c.next > c.stable {
			return
		}
		s.state = slotEmpty
		c.deliver(s.seq, s.time, s.epoch, s.account, s.instance, s.cmdSeq, s.flags, s.buf[:s.total])
		if cap(s.buf) > bigBufferBytes {
			if cap(s.buf) > cap(c.spareBig) {
				c.spareBig = s.buf
			}
			s.buf = nil
		}
	}
}

// deliver hands one message to the application after the protocol has
// looked at it (epochs here, acks and incarnations in observe), then runs
// the optional callbacks an internal message asks for.
func (c *Core) deliver(seq uint64, t int64, epoch uint32, acct wire.Account, inst uint8, cmdSeq uint64, flags uint8, payload []byte) {
	if t > c.now {
		c.now = t
	}
	mine := c.account != 0 && acct == c.account && flags&wire.FlagSeqGen == 0
	var call wire.InternalType
	var id uint64
	var value uint64
	var x *wire.Internal
	if flags&wire.FlagInternal != 0 && wire.DecodeInternal(payload, &c.ix) == nil {
		x = &c.ix
		forMe := c.account != 0 && x.Account == c.account && x.Instance == c.cfg.Instance
		switch x.Type {
		case wire.InternalEpochStart:
			if x.Epoch > c.deliveredEpoch {
				c.deliveredEpoch = x.Epoch
			}
		case wire.InternalNodeActivated, wire.InternalNodeDeactivated, wire.InternalTimer:
			if forMe {
				call, id, value = x.Type, x.ID, x.Value
			}
		}
	}
	c.observe(seq, acct, inst, cmdSeq, flags, payload, x)
	if c.err != nil {
		return
	}
	m := &c.msg
	m.Seq, m.Time, m.Epoch = seq, t, epoch
	m.Account, m.Instance, m.CmdSeq, m.Flags = acct, inst, cmdSeq, flags
	m.Payload = payload
	m.mine = mine
	c.stats.Delivered++
	c.h.OnMessage(m)
	m.Payload = nil
	switch call {
	case wire.InternalNodeActivated:
		if c.act != nil {
			c.act.OnActivated()
		}
	case wire.InternalNodeDeactivated:
		if c.act != nil {
			c.act.OnDeactivated()
		}
	case wire.InternalTimer:
		if c.tim != nil {
			c.tim.OnTimer(id, int64(value))
		}
	}
	c.next = seq + 1
	if c.contig < seq {
		c.contig = seq
	}
}

// gapEnd is the last seq of the receive window that is known to exist.
func (c *Core) gapEnd() uint64 {
	return min(c.tail, c.next+uint64(len(c.ring))-1)
}

// openGap reports the first seq needed and not held whole, if the stream
// says it exists (a fragmented message still arriving at the tail is not
// a gap until something proves it was published whole).
func (c *Core) openGap() (uint64, bool) {
	if !c.started || c.contig >= c.tail {
		return 0, false
	}
	from := c.contig + 1
	s := &c.ring[from&c.mask]
	if s.state == slotPartial && s.seq == from && from > c.sealed &&
		len(s.spans) == 1 && s.spans[0].from == 0 {
		return 0, false
	}
	return from, true
}

// updateGap arms the NAK timer of a new gap with a random first delay, or
// disarms it when the gap was repaired (by our NAK or by a repair another
// receiver asked for).
func (c *Core) updateGap(now int64) {
	from, ok := c.openGap()
	if !ok {
		c.nakArmed = false
		return
	}
	// A hole inside a large message counts as progress when its held
	// prefix grows: the next hole gets a fresh short delay instead of the
	// backoff, else a message with many holes is repaired at NakMaxDelay
	// per hole.
	var off uint32
	if s := &c.ring[from&c.mask]; s.state == slotPartial && s.seq == from && len(s.spans) > 0 && s.spans[0].from == 0 {
		off = s.spans[0].to
	}
	if c.nakArmed && from == c.nakFrom && off == c.nakOff {
		return
	}
	d := int64(c.cfg.NakDelay)
	c.nakArmed = true
	c.nakFrom = from
	c.nakOff = off
	c.nakBackoff = d
	c.nakAt = now + d/2 + int64(c.random()%uint64(d))
	c.stats.Gaps++
}

// sendNak asks for the whole region from the first missing seq to the
// last missing one in the window: one outstanding request per gap region.
func (c *Core) sendNak(now int64) {
	from := c.nakFrom
	to := c.gapEnd()
	for to > from {
		s := &c.ring[to&c.mask]
		if s.state != slotFull || s.seq != to {
			break
		}
		to--
	}
	// For a large message partly held, ask for its first hole only: the
	// bytes after the held prefix up to the next held range. Asking for
	// everything after the prefix would resend what is already here.
	var off, end uint32
	if s := &c.ring[from&c.mask]; s.state == slotPartial && s.seq == from && len(s.spans) > 0 {
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
	n := wire.Nak{Epoch: c.epoch, Session: c.session, FromSeq: from, ToSeq: to, FromOffset: off, ToOffset: end}
	if b, err := wire.AppendNak(c.nakBuf[:], &n); err == nil {
		c.out.Send(b)
		c.stats.NaksSent++
	}
	c.nakAt = now + c.nakBackoff
	c.nakBackoff = min(2*c.nakBackoff, int64(c.cfg.NakMaxDelay))
}

// onGone stops the node when the sequencer no longer retains a seq it
// needs; a later version will rewind from a replayer instead.
func (c *Core) onGone() {
	g := &c.gone
	if c.started && g.Session != c.session {
		c.stats.Fenced++
		return
	}
	from, ok := c.openGap()
	if !ok || g.Oldest != 0 && from >= g.Oldest {
		return // stale: nothing we need is lost
	}
	to := from
	end := c.gapEnd()
	for to < end {
		s := &c.ring[(to+1)&c.mask]
		if s.state == slotFull && s.seq == to+1 {
			break
		}
		to++
	}
	if g.Oldest != 0 && to >= g.Oldest {
		to = g.Oldest - 1
	}
	if g.Oldest == 0 {
		c.fail(fmt.Errorf("%w: seqs %d..%d no longer retained by sequencer (nothing retained)", ErrUnrecoverable, from, to))
		return
	}
	c.fail(fmt.Errorf("%w: seqs %d..%d no longer retained by sequencer (oldest %d)", ErrUnrecoverable, from, to, g.Oldest))
}
