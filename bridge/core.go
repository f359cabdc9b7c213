package bridge

import (
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// ReceiveCore is the pure part of a receiving end's Service goroutine:
// the Merge of the channels, the heartbeat that carries the origin's
// stable to the site, and the gap timer that restarts the reliable
// channels from the merged position (the NAK over TCP). It has no clock
// (now is passed in), no goroutine and no transport: ReceiveEnd drives it
// from its Service's goroutine on the process's clock, the simulator
// (test/sim) on its virtual one. Not safe for concurrent use.
type ReceiveCore struct {
	merge      *Merge
	gapTimeout int64
	hbInterval int64
	lastHB     int64
	lastGap    int64
	stable     uint64
	hb         []byte
}

// NewReceiveCore returns the core of a receiving end with cfg's
// GapTimeout, HelloInterval and MaxHeldBytes, channels channels of which
// the first reliable ones are TCP (they may begin the stream), whose
// stream resumes at seq from (0: an empty store).
func NewReceiveCore(cfg Config, channels, reliable int, from uint64) *ReceiveCore {
	c := &ReceiveCore{merge: NewMerge(channels, from, cfg.MaxHeldBytes), gapTimeout: int64(cfg.GapTimeout),
		hbInterval: int64(cfg.HelloInterval), hb: make([]byte, wire.PacketHeaderBytes)}
	for i := range reliable {
		c.merge.SetReliable(i)
	}
	return c
}

// Resume takes the header of the packet that holds st's last contiguous
// seq (a restart on a store that holds the stream) as the last one
// delivered, so that Heartbeat carries the stored tail and stable to
// the site before any channel brings a packet. Without it a restarted
// end stays silent while the origin has nothing new, and the site's
// nodes, whose resend timers run only on what they hear, never send
// again a command lost while the end was down: the origin then has
// nothing new for good. Call it before the first Packet, from the
// store's goroutine; a store that holds nothing changes nothing.
func (c *ReceiveCore) Resume(st *replayer.Store) {
	held := st.Contiguous()
	if held == 0 {
		return
	}
	st.Range(held, held, func(pkt []byte, _ sequencer.PacketInfo) bool {
		c.merge.resume(pkt)
		return false
	})
}

// Merge is the core's merge (its counters, NextSeq, HoleSince).
func (c *ReceiveCore) Merge() *Merge { return c.merge }

// Packet merges pkt, which channel ch received at now, and calls emit
// with every packet it lets through, in stream order (pkt itself, then
// the held packets its arrival made due). emit persists and republishes;
// the packet is only valid during the call.
func (c *ReceiveCore) Packet(ch int, pkt []byte, now int64, emit func([]byte)) {
	if c.merge.Offer(ch, pkt, now) != Deliver {
		return
	}
	emit(pkt)
	for {
		b, ok := c.merge.Next()
		if !ok {
			return
		}
		emit(b)
	}
}

// Heartbeat returns the heartbeat to publish on the site at now, given
// held, the last seq the store holds contiguously: when held moved past
// the last heartbeat's stable, or HelloInterval passed since it; nil
// otherwise (or before anything was delivered). Every record held was
// stable at the origin (the sending end stores only stable records), so
// the heartbeat's stable is held. The frame is valid until the next call.
func (c *ReceiveCore) Heartbeat(held uint64, now int64) []byte {
	if held <= c.stable && now-c.lastHB < c.hbInterval {
		return nil
	}
	p, ok := c.merge.Last()
	if !ok || held == 0 {
		return nil
	}
	c.stable, c.lastHB = held, now
	hb, err := wire.AppendHeartbeat(c.hb, p.Epoch, p.Session, held+1, held, p.BaseTime, p.EpochStart)
	if err != nil {
		return nil
	}
	return hb
}

// GapRestart reports whether a hole in the merged stream has outlived
// GapTimeout at now (at most once per GapTimeout): the reliable channels
// then restart from Merge().NextSeq().
func (c *ReceiveCore) GapRestart(now int64) bool {
	at, hole := c.merge.HoleSince()
	if !hole || now-at <= c.gapTimeout || now-c.lastGap <= c.gapTimeout {
		return false
	}
	c.lastGap = now
	return true
}

// DataFrame writes into out (whose capacity must hold it) the bridge data frame a sending end sends on a
// UDP flow for a packet of its store (a stored packet keeps the
// retransmit flag of the repair that brought it; on the link it is the
// stream itself, so the flag is cleared in the frame).
func DataFrame(out, stored []byte) ([]byte, error) {
	f, err := wire.AppendBridgeFrame(out, wire.BridgeData, stored)
	if err != nil {
		return f, err
	}
	pkt := f[wire.BridgeHeaderBytes:]
	wire.SetPacketFlags(pkt, wire.PacketFlags(pkt)&^wire.PacketRetransmit)
	return f, nil
}

// CommandOf returns the command frame a datagram that came back on a
// UDP flow carries, false for anything else (dropped and counted).
func CommandOf(datagram []byte) ([]byte, bool) {
	k, body, err := wire.DecodeBridge(datagram)
	if err != nil || k != wire.BridgeCommand {
		return nil, false
	}
	if pk, err := wire.PeekKind(body); err != nil || pk != wire.KindCommand {
		return nil, false
	}
	return body, true
}
