package sequencer

import (
	"encoding/binary"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// ring is the retransmit ring: the last RingPackets published packets in
// fixed slots of one allocation. Packets are numbered from 0 in publish
// order; packet p lives in slot p % len(meta). Their first seqs never
// decrease, which makes the ring searchable by seq.
type ring struct {
	mem    []byte
	size   int // bytes per slot (MaxPacketBytes)
	meta   []slotMeta
	oldest uint64 // first retained packet number
	next   uint64 // number of the packet being built or to be built
}

// slotMeta describes a retained packet without decoding it.
type slotMeta struct {
	firstSeq uint64
	count    uint32 // records
	bytes    uint32
	frag     bool   // the first record is a fragment
	fragOff  uint32 // its byte range in the whole message
	fragEnd  uint32
}

func (r *ring) init(packets, size int) {
	r.mem = make([]byte, packets*size)
	// Touch every page now: the kernel maps fresh zero pages lazily, and a
	// page fault on the hot path costs more than a thousand commands.
	for i := 0; i < len(r.mem); i += 4096 {
		r.mem[i] = 0
	}
	r.size = size
	r.meta = make([]slotMeta, packets)
}

func (r *ring) slot(p uint64) []byte {
	i := int(p % uint64(len(r.meta)))
	return r.mem[i*r.size : (i+1)*r.size : (i+1)*r.size]
}

// claim returns the slot for packet r.next to be built in, evicting the
// oldest packet when the ring is full.
func (r *ring) claim() []byte {
	if r.next-r.oldest == uint64(len(r.meta)) {
		r.oldest++
	}
	return r.slot(r.next)
}

// commit records the packet built in the claimed slot.
func (r *ring) commit(n int, firstSeq uint64, count int, pkt []byte) {
	m := &r.meta[r.next%uint64(len(r.meta))]
	m.firstSeq = firstSeq
	m.count = uint32(count)
	m.bytes = uint32(n)
	rec := pkt[wire.PacketHeaderBytes:]
	m.frag = rec[2]&wire.FlagFragment != 0
	if m.frag {
		m.fragOff = binary.LittleEndian.Uint32(rec[28:])
		m.fragEnd = m.fragOff + uint32(binary.LittleEndian.Uint16(rec))
	} else {
		m.fragOff, m.fragEnd = 0, 0
	}
	r.next++
}

func (r *ring) metaOf(p uint64) *slotMeta { return &r.meta[p%uint64(len(r.meta))] }

// search returns the first retained packet whose last seq is >= seq.
func (r *ring) search(seq uint64) uint64 {
	lo, hi := r.oldest, r.next
	for lo < hi {
		mid := lo + (hi-lo)/2
		m := r.metaOf(mid)
		if m.firstSeq+uint64(m.count)-1 < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// stepNak answers a NAK from the ring: the original packets covering
// FromSeq..ToSeq (at most MaxRetransmitPacketsPerNak, skipping fragments of
// FromSeq the receiver already holds), or Gone when FromSeq has left it.
func (c *Core) stepNak(now int64, frame []byte, from transport.Peer) error {
	n := &c.nak
	if err := wire.DecodeNak(frame, n); err != nil {
		c.stats.Malformed++
		return err
	}
	c.advance(now)
	if n.Session != c.session {
		c.stats.WrongSession++
		return nil
	}
	c.stats.Naks++
	if n.FromSeq > c.tail {
		// Not published yet (or never): the receiver is ahead of us or
		// confused; heartbeats will tell it the tail.
		c.stats.NaksBeyondTail++
		return nil
	}
	r := &c.ring
	if r.oldest == r.next {
		c.sendGone(from, n, 0)
		return nil
	}
	first := r.metaOf(r.oldest)
	if n.FromSeq < first.firstSeq || (n.FromSeq == first.firstSeq && first.frag && first.fragOff > n.FromOffset) {
		oldest := first.firstSeq
		if first.frag && first.fragOff > 0 {
			oldest++ // the oldest packet holds only the tail of its message
		}
		c.sendGone(from, n, oldest)
		return nil
	}
	// A second receiver asking for the same seq soon after the first means
	// the loss was shared (a switch, a slow host): one multicast answer
	// serves them all, and their pending NAKs are cancelled when it lands.
	multicast := c.cfg.MulticastRepairWindow > 0 && n.FromSeq == c.lastNakSeq &&
		from != c.lastNakPeer && c.now-c.lastNakAt < int64(c.cfg.MulticastRepairWindow)
	c.lastNakSeq, c.lastNakPeer, c.lastNakAt = n.FromSeq, from, c.now
	c.repairBucket.refill(c.now)
	sent := 0
	for p := r.search(n.FromSeq); p < r.next && sent < c.cfg.MaxRetransmitPacketsPerNak; p++ {
		m := r.metaOf(p)
		if m.firstSeq > n.ToSeq {
			break
		}
		if m.firstSeq == n.FromSeq && m.count == 1 && m.frag && m.fragEnd <= n.FromOffset {
			continue // a fragment the receiver already holds
		}
		if n.ToOffset != 0 && m.firstSeq == n.FromSeq && m.frag && m.fragOff >= n.ToOffset {
			break // past the hole: the receiver holds the rest of FromSeq
		}
		if !c.repairBucket.take(int(m.bytes)) {
			c.stats.Throttled++
			break
		}
		pkt := r.slot(p)[:m.bytes]
		wire.SetStable(pkt, c.stable)
		wire.SetPacketFlags(pkt, wire.PacketRetransmit)
		if multicast {
			c.sink.Publish(pkt)
		} else {
			c.sink.SendTo(from, pkt)
		}
		sent++
	}
	if multicast && sent > 0 {
		c.stats.RepairsMulticast++
	}
	c.stats.Retransmitted += uint64(sent)
	return nil
}

func (c *Core) sendGone(to transport.Peer, n *wire.Nak, oldest uint64) {
	c.gone = wire.Gone{Epoch: c.epoch, Session: c.session, FromSeq: n.FromSeq, ToSeq: n.ToSeq, Oldest: oldest}
	pkt, err := wire.AppendGone(c.gbuf[:], &c.gone)
	if err != nil {
		panic("sequencer: gone buffer too small: " + err.Error())
	}
	c.stats.Gones++
	c.sink.SendTo(to, pkt)
}
