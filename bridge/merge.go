package bridge

import (
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/wire"
)

// Header is what a heartbeat after a packet repeats of its header.
type Header struct {
	Epoch      uint32
	Session    uint64
	EpochStart uint64
	BaseTime   int64
}

// Verdict is what Merge.Offer decided about a packet.
type Verdict uint8

const (
	// Deliver: the packet is the first arrival at the next stream place;
	// the caller delivers it now, then the packets Next returns.
	Deliver Verdict = iota + 1
	// Held: the first arrival of a place after a hole; Merge kept a copy.
	Held
	// Duplicate: its place was delivered or is held already; dropped.
	Duplicate
	// Malformed: not a data packet with records; dropped.
	Malformed
	// Full: ahead of a hole with the hold buffer full; dropped (the
	// reliable channel brings it again).
	Full
)

// place is a position in the stream: a seq and, inside a fragmented
// message, the fragment offset.
type place struct {
	seq uint64
	off uint32
}

func (a place) less(b place) bool { return a.seq < b.seq || a.seq == b.seq && a.off < b.off }

// ChannelStats are one channel's counters in a Merge.
type ChannelStats struct {
	Packets   uint64 // data packets offered
	Bytes     uint64 // their bytes
	Firsts    uint64 // packets this channel brought first
	Dups      uint64 // packets another channel (or this one) brought first
	Malformed uint64
	Full      uint64 // dropped ahead of a hole with the hold buffer full
	LastSeq   uint64 // the highest seq this channel brought
	// LagSumNs / LagSamples is the mean, LagMaxNs the worst, of how long
	// after the first arrival this channel's copy came (duplicates whose
	// first arrival is still remembered).
	LagSumNs, LagMaxNs, LagSamples uint64
	Repairs                        uint64 // restarts from the merged position (set by the shell)
}

// FirstShare is the share of the packets this channel brought first.
func (c ChannelStats) FirstShare(total uint64) float64 {
	if total == 0 {
		return 0
	}
	return float64(c.Firsts) / float64(total)
}

// firstsRing remembers when each of the last packets first arrived, for
// the channels' lag in µs.
const firstsRing = 1 << 12

type firstArrival struct {
	seq uint64
	at  int64
	ch  int
}

// Merge is the pure A/B arbitration of a receiving end: packets of one
// stream arrive on several channels, in any order, with loss and copies;
// Merge lets through the first arrival of each stream place, in stream
// order, gap-free, each once. A packet ahead of a hole is copied into a
// bounded hold buffer (a replayer.Reorder) until the hole fills.
//
// A place is the packet's first seq and, for a packet that begins inside
// a fragmented message, the fragment offset. A packet whose records
// reach past the next place is delivered even if it begins before it (a
// channel resumed at a record boundary); the receiver drops the records
// it had. A newer epoch's first packet (its first seq at the epoch's
// start) is delivered even below the next place: the failover cut there;
// ahead of a hole it is held like any packet.
//
// It has no clock (now is passed in), no goroutine, and allocates nothing
// once warm. Not safe for concurrent use.
type Merge struct {
	begun    bool
	reliable []bool
	next     place
	epoch    uint32
	maxSeq   uint64
	hold     replayer.Reorder
	heldTake bool // Next returned hold.First: drop it on the next call
	holeAt   int64
	delivers uint64
	pkt      wire.Packet
	rec      wire.Record
	last     Header // of the last packet delivered
	haveLast bool
	firsts   [firstsRing]firstArrival
	ch       []ChannelStats
}

// NewMerge returns a Merge of channels channels whose first place is seq
// from, holding at most maxHeldBytes ahead of a hole. from 0 (an empty
// store) begins the stream at the first packet of a reliable channel
// (SetReliable): a datagram channel may join mid-stream, the TCP channel
// starts where the sending end's store does.
func NewMerge(channels int, from uint64, maxHeldBytes int) *Merge {
	m := &Merge{begun: from > 0, next: place{seq: max(from, 1)}, ch: make([]ChannelStats, channels), reliable: make([]bool, channels)}
	m.hold.Init(maxHeldBytes)
	return m
}

// SetReliable marks channel i as one that may begin the stream (a TCP
// channel: it carries every packet from where it starts).
func (m *Merge) SetReliable(i int) { m.reliable[i] = true }

// NextSeq is the seq of the first record not yet delivered whole.
func (m *Merge) NextSeq() uint64 { return m.next.seq }

// MaxSeq is the highest seq any channel brought.
func (m *Merge) MaxSeq() uint64 { return m.maxSeq }

// Delivered counts the packets let through.
func (m *Merge) Delivered() uint64 { return m.delivers }

// HoleSince is the time (as passed to Offer) the oldest packet now held
// arrived, and whether there is a hole at all.
func (m *Merge) HoleSince() (int64, bool) { return m.holeAt, m.hold.Len() > 0 }

// Channel returns channel i's counters.
func (m *Merge) Channel(i int) ChannelStats { return m.ch[i] }

// AddRepair counts a restart of channel i from the merged position.
func (m *Merge) AddRepair(i int) { m.ch[i].Repairs++ }

// span reads a packet's first place and the place after it, or false for
// anything but a data packet with records.
func (m *Merge) span(pkt []byte) (first, end place, epoch uint32, restart, ok bool) {
	p, r := &m.pkt, &m.rec
	if wire.DecodePacket(pkt, p) != nil || p.Kind != wire.KindData || p.Count == 0 {
		return first, end, 0, false, false
	}
	begin := true
	for p.Next(r) {
		if begin {
			first, begin = place{seq: r.Seq, off: r.Offset}, false
		}
		e := r.Offset + uint32(len(r.Payload))
		if !r.Fragment() || e == r.Total {
			end = place{seq: r.Seq + 1}
		} else {
			end = place{seq: r.Seq, off: e}
		}
	}
	return first, end, p.Epoch, p.FirstSeq == p.EpochStart, true
}

// Offer hands Merge a packet channel ch received at now. pkt is only
// read during the call. On Deliver the caller delivers pkt, then calls
// Next until it returns false.
func (m *Merge) Offer(ch int, pkt []byte, now int64) Verdict {
	m.release()
	c := &m.ch[ch]
	// Most copies lie wholly below the next place: the header says so.
	if e, fs, n, ok := wire.PeekPacketSeqs(pkt); ok && n > 0 && m.begun && fs+uint64(n) <= m.next.seq && e <= m.epoch {
		c.Packets++
		c.Bytes += uint64(len(pkt))
		c.LastSeq = max(c.LastSeq, fs+uint64(n)-1)
		m.dup(c, fs, now)
		return Duplicate
	}
	first, end, epoch, restart, ok := m.span(pkt)
	if !ok {
		c.Malformed++
		return Malformed
	}
	c.Packets++
	c.Bytes += uint64(len(pkt))
	last := end.seq
	if end.off == 0 {
		last--
	}
	c.LastSeq = max(c.LastSeq, last)
	m.maxSeq = max(m.maxSeq, last)
	if !m.begun && m.reliable[ch] {
		m.begun, m.next = true, first
	}
	switch {
	case !m.begun:
		// Held below, until a reliable channel begins the stream.
	case !m.next.less(end) && !m.restarts(restart, epoch):
		m.dup(c, first.seq, now)
		return Duplicate
	case !m.next.less(first):
		// At the next place, or reaching past it (a newer epoch's start
		// among them). A newer epoch's start ahead of a hole waits for
		// it below: the seqs before it are stable records it kept.
		m.deliver(ch, first.seq, end, epoch, now)
		return Deliver
	}
	if m.hold.Len() == 0 {
		m.holeAt = now
	}
	same, err := m.hold.Put(pkt)
	switch {
	case same:
		m.dup(c, first.seq, now)
		return Duplicate
	case err != nil:
		c.Full++
		return Full
	}
	// Its channel is credited with a first arrival when it is delivered.
	m.firsts[first.seq%firstsRing] = firstArrival{seq: first.seq, at: now, ch: ch}
	return Held
}

// restarts reports a newer epoch's first packet, which goes even below
// the next place (once something was delivered: the epoch known).
func (m *Merge) restarts(restart bool, epoch uint32) bool {
	return restart && m.epoch > 0 && epoch > m.epoch
}

func (m *Merge) deliver(ch int, seq uint64, end place, epoch uint32, now int64) {
	m.ch[ch].Firsts++
	m.firsts[seq%firstsRing] = firstArrival{seq: seq, at: now, ch: ch}
	m.next, m.epoch = end, max(m.epoch, epoch)
	m.delivers++
	m.noteLast()
}

// noteLast keeps the header of the packet span decoded last, which is
// being delivered.
func (m *Merge) noteLast() {
	p := &m.pkt
	m.last, m.haveLast = Header{Epoch: p.Epoch, Session: p.Session, EpochStart: p.EpochStart, BaseTime: p.BaseTime}, true
}

// resume takes stored's header as the last delivered (ReceiveCore.Resume),
// unless a packet was delivered already.
func (m *Merge) resume(stored []byte) {
	if m.haveLast || wire.DecodePacket(stored, &m.pkt) != nil {
		return
	}
	m.noteLast()
}

// Last is the header of the last packet delivered, false before any
// (or the stored one ReceiveCore.Resume took).
func (m *Merge) Last() (Header, bool) { return m.last, m.haveLast }

func (m *Merge) dup(c *ChannelStats, seq uint64, now int64) {
	c.Dups++
	if f := m.firsts[seq%firstsRing]; f.seq == seq && now >= f.at {
		lag := uint64(now - f.at)
		c.LagSumNs += lag
		c.LagSamples++
		c.LagMaxNs = max(c.LagMaxNs, lag)
	}
}

// release drops the held packet Next returned last.
func (m *Merge) release() {
	if m.heldTake {
		m.heldTake = false
		m.hold.Drop()
	}
}

// Next returns the next held packet that is now due, in stream order,
// dropping those the delivered stream already covers; false when none
// is. The packet is valid until the next call of Next or Offer.
func (m *Merge) Next() ([]byte, bool) {
	m.release()
	for m.begun && m.hold.Len() > 0 {
		h := m.hold.First()
		first, end, epoch, restart, ok := m.span(h.Frame)
		switch {
		case !ok || !m.next.less(end) && !m.restarts(restart, epoch):
			m.hold.Drop() // covered meanwhile
			continue
		case m.next.less(first):
			return nil, false // the hole is still open (a newer epoch's start too)
		}
		m.next, m.epoch = end, max(m.epoch, epoch)
		m.delivers++
		m.noteLast()
		if f := m.firsts[first.seq%firstsRing]; f.seq == first.seq {
			m.ch[f.ch].Firsts++
		}
		m.heldTake = true
		return h.Frame, true
	}
	return nil, false
}
