package sequencer

import (
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// repairState is the NAK being answered, for repairPacket (a handler built
// once, so that Range is called without a closure).
type repairState struct {
	to        transport.Peer
	multicast bool
	history   bool // answering from an earlier epoch's packets
	sent      int  // packets
	bytes     int
}

// stepNak answers a NAK from the retransmit store: the original packets
// covering FromSeq..ToSeq (at most NakAnswerBytes of them, and at least one
// packet; skipping fragments of FromSeq the receiver already holds), or Gone
// when FromSeq has left the store. The policy sits above RetransmitStore so
// that any store answers the same way.
func (c *Core) stepNak(now Time, frame []byte, from transport.Peer) error {
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
	// Seqs at or below the cut are an earlier epoch's: a new primary
	// answers them from the history it took over (the standby's store),
	// and never beyond the cut.
	store, to := c.store, n.ToSeq
	if n.FromSeq < c.epochStart && c.history != nil {
		store, to = c.history, min(to, c.epochStart-1)
	}
	first, ok := store.Oldest()
	if !ok {
		c.sendGone(from, n, 0)
		return nil
	}
	if n.FromSeq < first.FirstSeq || (n.FromSeq == first.FirstSeq && first.Fragment && first.FragFrom > n.FromOffset) {
		oldest := first.FirstSeq
		if first.Fragment && first.FragFrom > 0 {
			oldest++ // the oldest packet holds only the tail of its message
		}
		c.sendGone(from, n, oldest)
		return nil
	}
	// A second receiver asking for the same seq soon after the first means
	// the loss was shared (a switch, a slow host): one multicast answer
	// serves them all, and their pending NAKs are cancelled when it lands.
	multicast := c.cfg.MulticastRepairWindow > 0 && n.FromSeq == c.lastNakSeq &&
		from != c.lastNakPeer && c.mono-c.lastNakAt < int64(c.cfg.MulticastRepairWindow)
	c.lastNakSeq, c.lastNakPeer, c.lastNakAt = n.FromSeq, from, c.mono
	c.repairBucket.refill(c.mono)
	c.repair = repairState{to: from, multicast: multicast, history: store != c.store}
	store.Range(n.FromSeq, to, c.onRepair)
	if multicast && c.repair.sent > 0 {
		c.stats.RepairsMulticast++
	}
	c.stats.Retransmitted += uint64(c.repair.sent)
	return nil
}

// repairPacket sends one stored packet in answer to c.nak, or returns
// false when the answer is complete (past the hole, NakAnswerBytes, or the
// bandwidth cap).
func (c *Core) repairPacket(pkt []byte, m PacketInfo) bool {
	n := &c.nak
	if m.FirstSeq == n.FromSeq && m.Count == 1 && m.Fragment && m.FragTo <= n.FromOffset {
		return true // a fragment the receiver already holds
	}
	if n.ToOffset != 0 && m.FirstSeq == n.FromSeq && m.Fragment && m.FragFrom >= n.ToOffset {
		return false // past the hole: the receiver holds the rest of FromSeq
	}
	if c.repair.sent > 0 && c.repair.bytes+len(pkt) > c.cfg.NakAnswerBytes {
		return false // the receiver asks again for the rest, which paces it
	}
	if !c.repairBucket.take(len(pkt)) {
		c.stats.Throttled++
		return false
	}
	stable := c.stable
	if c.repair.history {
		// An earlier epoch's packet may carry records past the cut, which
		// no receiver may ever deliver: it claims no more than the cut.
		stable = min(stable, c.epochStart-1)
	}
	wire.SetStable(pkt, stable)
	wire.SetPacketFlags(pkt, wire.PacketRetransmit)
	if c.repair.multicast {
		c.sink.Publish(pkt)
	} else {
		c.sink.SendTo(c.repair.to, pkt)
	}
	c.repair.sent++
	c.repair.bytes += len(pkt)
	return true
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
