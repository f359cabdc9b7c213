package node

import (
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// handleReady acts on the receiver's output in its documented order:
// frames to send (NAKs, status), then messages to deliver. A node persists
// nothing. Then the send half looks at a stable fragment of its own large
// command held while the rest is repaired (see observe).
func (c *Core) handleReady() {
	rd := c.r.Ready()
	for i := range rd.Send {
		if f := &rd.Send[i]; f.To != receiver.Sequencer && c.srcOut != nil {
			c.srcOut.SendTo(f.To, f.Bytes)
		} else {
			c.out.Send(f.Bytes)
		}
	}
	for i := range rd.Deliver {
		if c.err != nil {
			break // the send half stopped the node (ErrSuperseded...)
		}
		c.deliver(&rd.Deliver[i])
	}
	c.r.Advance()
	c.next = c.r.Next()
	if t := c.r.Now(); t > c.now {
		c.now = t
		c.timeKnown = true
	}
	if err := c.r.Err(); err != nil {
		c.fail(err)
	}
	if c.err != nil {
		return
	}
	if h := &c.head; c.r.HeldHead(h) && h.Account == c.account {
		c.observe(h.Seq, h.Account, h.Instance, h.CmdSeq, h.Flags|wire.FlagFragment, nil, nil)
	}
	if c.hh.on {
		c.drainBacklog(c.clock) // acks freed window space
	}
}

// deliver hands one message to the application after the send half has
// looked at it (acks, incarnation), then runs the optional callbacks an
// internal message asks for.
func (c *Core) deliver(d *receiver.Message) {
	c.next = d.Seq
	c.timeKnown = true
	if d.Time > c.now {
		c.now = d.Time
	}
	var x *wire.Internal
	var call wire.InternalType
	var id, value uint64
	if d.Flags&wire.FlagInternal != 0 && wire.DecodeInternal(d.Payload, &c.ix) == nil {
		x = &c.ix
		if c.account != 0 && x.Account == c.account && x.Instance == c.cfg.Instance {
			switch x.Type {
			case wire.InternalNodeActivated, wire.InternalNodeDeactivated, wire.InternalTimer:
				call, id, value = x.Type, x.ID, x.Value
			}
		}
	}
	mine := c.account != 0 && d.Account == c.account
	// A hot-hot instance's sends inside this delivery's callbacks are
	// numbered from its seq; its activation callbacks follow the changes
	// of its own state, not every record naming it.
	wasActive := c.hh.active
	if c.hh.on {
		c.hh.origin, c.hh.sends = d.Seq, 0
		if call == wire.InternalNodeActivated || call == wire.InternalNodeDeactivated {
			call = 0
		}
	}
	if x != nil || mine {
		c.observe(d.Seq, d.Account, d.Instance, d.CmdSeq, d.Flags, d.Payload, x)
		if c.err != nil {
			c.hh.origin = 0
			return
		}
	}
	if c.hh.on && wasActive != c.hh.active {
		call = wire.InternalNodeDeactivated
		if c.hh.active {
			call = wire.InternalNodeActivated
		}
	}
	m := &c.msg
	m.Seq, m.Time, m.Epoch = d.Seq, d.Time, d.Epoch
	m.Account, m.Instance, m.CmdSeq, m.Flags = d.Account, d.Instance, d.CmdSeq, d.Flags
	m.Payload = d.Payload
	m.mine = mine && d.Flags&wire.FlagSeqGen == 0
	if d.Flags&wire.FlagOOB == 0 || c.cfg.OOBInOrder || !c.oobGiven(d.Seq) {
		c.h.OnMessage(m)
	}
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
	c.hh.origin = 0
}
