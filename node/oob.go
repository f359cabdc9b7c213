package node

import "github.com/seqd/seqd/wire"

// oob is the out-of-band half of Core: messages sent with CmdOOB handed
// to an OOBHandler as their packet arrives, ahead of any gap before them.
type oob struct {
	h OOBHandler // nil: no early delivery
	// given[seq % len] == seq: seq went to OnOOB (the window is the
	// receive ring's: a record further ahead is dropped by the receiver).
	given []uint64
	pkt   wire.Packet
	rec   wire.Record
	m     Message
}

func (c *Core) initOOB(h Handler) {
	if o, ok := h.(OOBHandler); ok {
		c.oob.h = o
		c.oob.given = make([]uint64, c.cfg.PendingRecords)
	}
}

// earlyOOB hands the whole out-of-band records of a live data frame not
// yet delivered nor handed before to OnOOB. It runs before the receiver
// sees the frame; it reads a copy of the header only.
func (c *Core) earlyOOB(frame []byte) {
	o := &c.oob
	if k, err := wire.PeekKind(frame); err != nil || k != wire.KindData || c.Rewinding() {
		return
	}
	if wire.DecodePacket(frame, &o.pkt) != nil || o.pkt.Session != c.r.Session() && c.r.Session() != 0 {
		return
	}
	r := &o.rec
	for o.pkt.Next(r) {
		if r.Flags&wire.FlagOOB == 0 || r.Flags&wire.FlagFragment != 0 || r.Seq < c.next {
			continue
		}
		slot := &o.given[r.Seq%uint64(len(o.given))]
		if *slot == r.Seq {
			continue
		}
		*slot = r.Seq
		m := &o.m
		m.Seq, m.Time, m.Epoch = r.Seq, r.Time, o.pkt.Epoch
		m.Account, m.Instance, m.CmdSeq, m.Flags = r.Account, r.Instance, r.CmdSeq, r.Flags
		m.Payload = r.Payload
		m.mine = c.account != 0 && r.Account == c.account
		c.stats.OOBEarly++
		o.h.OnOOB(m)
		m.Payload = nil
	}
}

// oobGiven reports whether seq was handed to OnOOB already.
func (c *Core) oobGiven(seq uint64) bool {
	o := &c.oob
	return o.h != nil && o.given[seq%uint64(len(o.given))] == seq
}
