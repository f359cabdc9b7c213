package sequencer

import "github.com/seqd/seqd/wire"

// maxTimeDelta is the largest record time offset a packet header can carry.
const maxTimeDelta = 0xFFFFFFFF

// maxRecords is the record count a packet header can carry.
const maxRecords = 0xFFFF

// emitInternal sequences c.in as an internal record at the current time.
func (c *Core) emitInternal(flags uint8, account wire.Account, instance uint8, cmdSeq uint64) uint64 {
	c.in.Epoch = c.epoch
	p, err := wire.AppendInternal(c.ibuf[:], &c.in)
	if err != nil {
		panic("sequencer: internal buffer too small: " + err.Error())
	}
	return c.appendMessage(flags, account, instance, cmdSeq, p)
}

// appendMessage assigns the next seq to payload at the current time and
// writes it to the open packet, fragmenting it when it cannot fit an empty
// packet. Full packets are published on the way.
func (c *Core) appendMessage(flags uint8, account wire.Account, instance uint8, cmdSeq uint64, payload []byte) uint64 {
	seq := c.nextSeq
	r := &c.rec
	r.Time = c.now
	r.Account = account
	r.Instance = instance
	r.CmdSeq = cmdSeq
	if len(payload) <= c.emptyRoom {
		r.Flags = flags
		r.Payload = payload
		if c.open && (c.w.Room() < len(payload) || c.now-c.w.BaseTime() > maxTimeDelta || c.w.Count() == maxRecords) {
			c.publishOpen()
		}
		if !c.open {
			c.startPacket()
		}
		if err := c.w.Append(r); err != nil {
			panic("sequencer: record rejected by a packet with room: " + err.Error())
		}
	} else {
		c.appendFragments(flags, payload)
	}
	c.nextSeq++
	c.stats.Messages++
	// The primary applies what it emits, through the same Apply as a
	// standby reading the stream.
	a := &c.app
	a.Seq, a.Time, a.Flags, a.Account, a.Instance, a.CmdSeq, a.Payload = seq, c.now, flags, account, instance, cmdSeq, payload
	if err := c.state.Apply(a); err != nil {
		panic("sequencer: state refused a record the core emitted: " + err.Error())
	}
	return seq
}

// appendFragments writes a message too large for one packet: every
// fragment starts a packet of its own and all but the last are published
// at once; the last stays open so later records can share its packet.
func (c *Core) appendFragments(flags uint8, payload []byte) {
	if c.open {
		c.publishOpen()
	}
	r := &c.rec
	r.Flags = flags | wire.FlagFragment
	r.Total = uint32(len(payload))
	for off := 0; off < len(payload); {
		c.startPacket()
		n := min(c.w.FragmentRoom(), len(payload)-off)
		c.openInfo.Fragment = true
		c.openInfo.FragFrom, c.openInfo.FragTo = uint32(off), uint32(off+n)
		r.Offset = uint32(off)
		r.Payload = payload[off : off+n]
		if err := c.w.Append(r); err != nil {
			panic("sequencer: fragment rejected by an empty packet: " + err.Error())
		}
		off += n
		if off < len(payload) {
			c.partial = true
			c.publishOpen()
		}
	}
}

// startPacket opens a packet in the ring region where it will stay,
// evicting the oldest packets to make room for a full one.
func (c *Core) startPacket() {
	buf := c.ring.claim(c.cfg.MaxPacketBytes)
	c.spillEvicted()
	c.openInfo = PacketInfo{FirstSeq: c.nextSeq}
	c.openedAt = c.mono
	if err := c.w.Reset(buf, wire.KindData, c.epoch, c.session, c.nextSeq, c.now, c.epochStart); err != nil {
		panic("sequencer: ring slot smaller than a packet header: " + err.Error())
	}
	c.open = true
}

// publishOpen stamps stable into the open packet, commits it to the ring
// and adds it to Ready.
func (c *Core) publishOpen() {
	pkt := c.w.Bytes()
	c.openInfo.Count = c.w.Count()
	c.ring.commit(len(pkt), &c.openInfo)
	last := c.openInfo.LastSeq()
	c.tail = last
	if c.partial {
		last--
	}
	c.published = last
	if c.cfg.Standalone {
		c.stable = last
	}
	wire.SetStable(pkt, c.stable)
	c.stableSent = c.stable
	c.lastSend = c.mono
	c.hbEvery = int64(c.cfg.HeartbeatInterval)
	c.open = false
	c.partial = false
	c.stats.Packets++
	c.publishData(pkt, c.ring.next-1)
}

// heartbeat publishes an empty packet telling the next seq and stable.
func (c *Core) heartbeat() {
	pkt, err := wire.AppendHeartbeat(c.out.arena.take(wire.PacketHeaderBytes), c.epoch, c.session, c.nextSeq, c.stable, c.now, c.epochStart)
	if err != nil {
		panic("sequencer: heartbeat buffer too small: " + err.Error())
	}
	c.stableSent = c.stable
	c.lastSend = c.mono
	c.stats.Heartbeats++
	c.out.ready.Packets = append(c.out.ready.Packets, Packet{Bytes: pkt})
}
