package sequencer

import (
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Ready is the Core's output since the last Advance, as etcd-raft's Ready
// and package receiver's are: a value the shell acts on, in this order,
// then acknowledges with Advance:
//
//  1. Packets, in slice order, to everyone (the stream): the data packets
//     the Core built, its heartbeats and the repairs it sends to
//     everyone. A shell that keeps the stream (a cluster's primary writes
//     it to its store) keeps the Data ones.
//  2. Replies, each to its peer: retransmits and Gones.
//
// Nothing is copied or allocated per message: a data packet is a view of
// the retransmit ring; heartbeats, repairs and Gones are built in a
// buffer the Core reuses after Advance. Every view stays valid and
// unchanged until Advance, and a Retained one longer: until the shell's
// transport sent it, provided the shell hands each Ready to its
// transport before its next call into the Core (see SetRetained).
type Ready struct {
	Packets []Packet
	Replies []Reply
}

// Packet is one stream packet of a Ready.
type Packet struct {
	Bytes []byte
	// Data: a data packet published for the first time (not a heartbeat,
	// not a repair).
	Data bool
	// Retained: Bytes may be published by reference
	// (transport.Retainer.PublishRetained); else the transport copies it.
	Retained bool
}

// Reply is one unicast packet of a Ready.
type Reply struct {
	To    transport.Peer
	Bytes []byte
}

// Empty says there is nothing to send.
func (r *Ready) Empty() bool { return len(r.Packets) == 0 && len(r.Replies) == 0 }

// arena is where the Core builds the output that is not a ring packet:
// taken in pieces, reset by Advance. A piece taken stays valid until the
// reset, also after the arena grows (the old array lives on while views
// of it do), so it grows to the largest Ready and then allocates nothing.
type arena struct{ buf []byte }

func (a *arena) take(n int) []byte {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(2*cap(a.buf), n, 16<<10))
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l+n : l+n]
}

func (a *arena) copyOf(pkt []byte) []byte {
	b := a.take(len(pkt))
	copy(b, pkt)
	return b
}

// output is the Ready being accumulated.
type output struct {
	ready Ready
	arena arena
	// pend are the indices in ready.Packets of the data packets that are
	// still views of the ring, oldest first from pendHead; the first is
	// ring packet pendNo, the next pendNo+1, and so on. dataBytes is the
	// size of all the Ready's data packets.
	pend      []int32
	pendHead  int
	pendNo    uint64
	dataBytes int
}

// Ready returns the output since the last Advance; see Ready.
func (c *Core) Ready() Ready { return c.out.ready }

// HasReady says whether Ready holds anything.
func (c *Core) HasReady() bool { return !c.out.ready.Empty() }

// Advance acknowledges the last Ready: the shell handed it to its
// transport. Its views (Retained ones excepted) may be reused from now on.
func (c *Core) Advance() {
	o := &c.out
	clear(o.ready.Packets) // drop the views, so the arena's old arrays can go
	clear(o.ready.Replies)
	o.ready.Packets, o.ready.Replies = o.ready.Packets[:0], o.ready.Replies[:0]
	o.arena.buf = o.arena.buf[:0]
	o.pend, o.pendHead, o.dataBytes = o.pend[:0], 0, 0
}

// publishData adds the ring packet just committed (number no) to Ready.
func (c *Core) publishData(pkt []byte, no uint64) {
	o := &c.out
	if o.pendHead == len(o.pend) {
		o.pend, o.pendHead, o.pendNo = o.pend[:0], 0, no
	}
	o.pend = append(o.pend, int32(len(o.ready.Packets)))
	o.ready.Packets = append(o.ready.Packets, Packet{Bytes: pkt, Data: true, Retained: c.retainMax > 0})
	o.dataBytes += len(pkt)
}

// spillEvicted copies out of the ring the Ready's data packets that the
// last claim evicted, before the packet being built overwrites them: a
// call whose output is larger than the ring (a small ring, a large
// message) still hands every packet to the shell. Such a copy is not
// Retained.
func (c *Core) spillEvicted() {
	o := &c.out
	for o.pendHead < len(o.pend) && o.pendNo < c.ring.first {
		p := &o.ready.Packets[o.pend[o.pendHead]]
		p.Bytes, p.Retained = o.arena.copyOf(p.Bytes), false
		o.pendHead++
		o.pendNo++
	}
}

// outSink is the Sink of the Core's Repairer: it adds the Repairer's
// packets, built in the Core's arena (Repairer.arena), to Ready.
type outSink struct{ o *output }

func (s outSink) Publish(pkt []byte) {
	s.o.ready.Packets = append(s.o.ready.Packets, Packet{Bytes: pkt})
}

func (s outSink) SendTo(to transport.Peer, pkt []byte) {
	s.o.ready.Replies = append(s.o.ready.Replies, Reply{To: to, Bytes: pkt})
}

// SetRetained tells the Core that its shell's transport can publish by
// reference, holding at most maxBytes of such packets before it sends
// them (transport.Retainer). The Core then marks its data packets
// Retained when its ring holds that much, the margin, and the output of
// one call (the fragments of a MaxMessageBytes message and a packet
// more), so that it never overwrites a packet still queued: the
// transport sends straight from the ring, with no copy. It says whether
// it does. The shell must then hand each Ready to its transport before
// its next call into the Core. Call it before the first Flush.
func (c *Core) SetRetained(maxBytes int) bool {
	c.retainMax = 0
	if maxBytes > 0 && c.cfg.RingBytes >= RetainRingBytes(c.cfg, maxBytes) {
		c.retainMax = maxBytes
		c.retainBudget = c.cfg.RingBytes - maxBytes - retainMarginPackets*c.cfg.MaxPacketBytes
	}
	return c.retainMax > 0
}

// RetainRingBytes is the smallest RingBytes with which a Core of cfg
// retains packets for a transport that holds maxBytes of them
// (SetRetained).
func RetainRingBytes(cfg Config, maxBytes int) int {
	return maxBytes + retainMarginPackets*cfg.MaxPacketBytes + oneCallBytes(cfg)
}

// oneCallBytes bounds the ring bytes one call's output takes: the
// fragments of a MaxMessageBytes message (with the padding at chunk
// ends) and a packet of other records.
func oneCallBytes(cfg Config) int {
	room := cfg.MaxPacketBytes - wire.PacketHeaderBytes - wire.RecordHeaderBytes - 16
	pkts := cfg.MaxMessageBytes/max(1, room) + 2
	bytes := pkts * cfg.MaxPacketBytes
	return bytes + (bytes/ringChunkBytes+1)*cfg.MaxPacketBytes
}

// retainFull says a retaining Core's Ready is as large as one call may
// make it: Tick then leaves the timers still due for the next call.
func (c *Core) retainFull() bool {
	return c.retainMax > 0 && c.out.dataBytes+2*c.cfg.MaxPacketBytes > c.retainBudget
}

// SinkShell is the smallest shell of a Core: after each call it hands the
// Ready to a Sink (in Ready's order; Retained packets by PublishRetained
// when the Sink is a RetainingSink) and advances. Tests, the simulator
// and tools that drive a Core by hand use it; the Sink is called after
// the Core's call returned, never from inside it.
type SinkShell struct {
	*Core
	Sink Sink
	ret  RetainingSink // Sink, when it is one
}

// Step is Core.Step, then Drain.
func (s SinkShell) Step(now Time, frame []byte, from transport.Peer) error {
	err := s.Core.Step(now, frame, from)
	s.Drain()
	return err
}

// Flush is Core.Flush, then Drain.
func (s SinkShell) Flush(now Time) {
	s.Core.Flush(now)
	s.Drain()
}

// Tick is Core.Tick, then Drain.
func (s SinkShell) Tick(now Time) {
	s.Core.Tick(now)
	s.Drain()
}

// Emit is Core.Emit, then Drain.
func (s SinkShell) Emit(now Time, m *wire.Internal) uint64 {
	seq := s.Core.Emit(now, m)
	s.Drain()
	return seq
}

// Drain hands the Core's Ready to the Sink and advances.
func (s SinkShell) Drain() {
	if !s.Core.HasReady() {
		return
	}
	rd := s.Core.Ready()
	for i := range rd.Packets {
		if p := &rd.Packets[i]; p.Retained && s.ret != nil {
			s.ret.PublishRetained(p.Bytes)
		} else {
			s.Sink.Publish(p.Bytes)
		}
	}
	for i := range rd.Replies {
		s.Sink.SendTo(rd.Replies[i].To, rd.Replies[i].Bytes)
	}
	s.Core.Advance()
}

// NewSinkShell is New, with the Core's output going to sink; a
// RetainingSink's retention is passed on (SetRetained).
func NewSinkShell(cfg Config, sink Sink) (SinkShell, error) {
	c, err := New(cfg)
	return sinkShell(c, sink, err)
}

// NewPrimarySinkShell is NewPrimary with the output going to sink.
func NewPrimarySinkShell(cfg Config, sink Sink, t Takeover) (SinkShell, error) {
	c, err := NewPrimary(cfg, t)
	return sinkShell(c, sink, err)
}

func sinkShell(c *Core, sink Sink, err error) (SinkShell, error) {
	if err != nil {
		return SinkShell{}, err
	}
	s := SinkShell{Core: c, Sink: sink}
	if r, ok := sink.(RetainingSink); ok {
		c.SetRetained(r.MaxRetainedBytes())
		s.ret = r
	}
	return s, nil
}
