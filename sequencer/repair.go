package sequencer

import (
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// RepairConfig is the repair policy: how much one NAK gets, how much all
// repairs together may take, and when an answer goes to everyone. The
// Core takes it from its Config; a replayer from its own.
type RepairConfig struct {
	// NakAnswerBytes caps the answer to one NAK (at least one packet is
	// sent); the receiver asks again for the rest, which paces it.
	NakAnswerBytes int
	// RetransmitBytesPerSecond caps the bandwidth of all repairs (a token
	// bucket holding 50ms of it, and at least MaxPacketBytes); 0: no cap.
	RetransmitBytesPerSecond int64
	// MulticastRepairWindow: a second receiver asking for the same seq
	// within this window gets the answer by Sink.Publish (to everyone);
	// 0: always unicast.
	MulticastRepairWindow time.Duration
	// MaxPacketBytes is the largest packet the store holds.
	MaxPacketBytes int
	// SourceBytesPerSecond caps the repairs answered to one source (a
	// token bucket per NAK sender, SourceBurstBytes deep, at least
	// MaxPacketBytes); 0: no cap. A NAK costs 48 bytes and could ask for
	// NakAnswerBytes: without a per-source budget one host turns a
	// trickle of NAKs into the whole repair bandwidth (a 48-byte NAK for
	// 1..tail was answered with 1 MiB). The table holds
	// maxRepairSources sources, the least recently answered forgotten
	// first (a forgotten source starts with a full bucket again).
	SourceBytesPerSecond int64
	SourceBurstBytes     int
}

// maxRepairSources bounds the per-source budget table.
const maxRepairSources = 64

// repairSource is one NAK sender's repair budget.
type repairSource struct {
	peer   transport.Peer
	used   int64 // mono time of its last NAK
	bucket tokenBucket
}

// RepairStats are a Repairer's counters.
type RepairStats struct {
	Retransmitted    uint64 // packets sent again in answer to NAKs
	RepairsMulticast uint64 // answers published to everyone (several receivers asked)
	Throttled        uint64 // answers cut short by RetransmitBytesPerSecond
	Gones            uint64 // Gone replies (the range left the store)
	SourceThrottled  uint64 // answers cut short by SourceBytesPerSecond (one source asked for more than its budget)
}

// Repairer is the repair policy, pure and shared: the Core answers NAKs
// with it from its ring (and a new primary from the history it took
// over), a replayer from its segment store. It answers a NAK with the
// original packets covering FromSeq..ToSeq (at most NakAnswerBytes of
// them and at least one, skipping fragments of FromSeq the receiver
// holds), under a bandwidth cap, by multicast when a second receiver asks
// for the same seq within MulticastRepairWindow, and with Gone when
// FromSeq has left the store. It has no clock: mono is passed in.
// Output goes to the Sink, synchronously (a Core's Sink only adds it to
// the Core's Ready); nothing is allocated per NAK.
type Repairer struct {
	cfg      RepairConfig
	sink     Sink
	bucket   tokenBucket
	sources  []repairSource // per-source budgets, at most maxRepairSources
	onRepair PacketFunc     // r.repairPacket, built once
	// arena, if set (the Core's), is where each packet is copied before
	// its headers are patched, and each Gone built, leaving the store's
	// bytes alone (the Core's ring packets may still be queued in a Ready
	// or a transport); the copies live until the Core's Advance.
	arena *arena

	lastNakSeq  uint64 // FromSeq of the last NAK answered
	lastNakPeer transport.Peer
	lastNakAt   int64 // mono

	// The NAK being answered, for repairPacket.
	nak    *wire.Nak
	answer Answer
	st     repairState

	gone  wire.Gone
	gbuf  [wire.GoneBytes]byte
	stats RepairStats
}

// repairState is the progress of the answer being sent.
type repairState struct {
	to        transport.Peer
	src       *tokenBucket // the source's budget, nil: none
	multicast bool
	sent      int // packets
	bytes     int
}

// Answer says where one NAK is answered from and how.
type Answer struct {
	// Store holds the packets served.
	Store RetransmitStore
	// ToSeq: no packet whose first seq is past it is served (the cut of an
	// earlier epoch, or the NAK's ToSeq).
	ToSeq uint64
	// Epoch and Session are those of a Gone reply.
	Epoch   uint32
	Session uint64
	// Stamp sets each packet's stable header to Stable (the current
	// primary); without it a packet goes with the stable it was stored
	// with, which only the primary set (a replayer never advances a
	// receiver's stable).
	Stamp  bool
	Stable uint64
	// StampEpoch, if not 0, limits Stamp to the packets of that epoch;
	// a packet of another epoch is stamped no more than its epoch's cut
	// as Cuts give it, else as the store's PacketInfo.EpochEnd gives it,
	// and keeps the stable it was stored with when neither knows. A new
	// primary knows the cut of the epoch before its own (its start less
	// one); stamped with its stable, an older epoch's packet would tell a
	// receiver that skipped the epochs in between that records past that
	// epoch's cut were kept. The stored stable was set by that epoch's
	// own primary and never passes its cut (but may lag it: a receiver
	// that knows no later epoch start waits for the rest).
	StampEpoch uint32
	// Cuts are earlier epochs' ends from the failover state
	// (Takeover.Cuts).
	Cuts []EpochCut
}

// NewRepairer returns a Repairer sending through sink.
func NewRepairer(cfg RepairConfig, sink Sink) *Repairer {
	r := &Repairer{cfg: cfg, sink: sink}
	r.bucket.init(uint64(cfg.RetransmitBytesPerSecond), max(uint64(cfg.RetransmitBytesPerSecond)/20, uint64(cfg.MaxPacketBytes)))
	r.onRepair = r.repairPacket
	if cfg.SourceBytesPerSecond > 0 {
		r.sources = make([]repairSource, 0, maxRepairSources)
	}
	return r
}

// sourceBucket returns from's budget, refilled to mono (a new one, full,
// replacing the least recently used when the table is full), or nil when
// there is no per-source cap.
func (r *Repairer) sourceBucket(mono int64, from transport.Peer) *tokenBucket {
	if r.cfg.SourceBytesPerSecond <= 0 {
		return nil
	}
	var e *repairSource
	for i := range r.sources {
		if r.sources[i].peer == from {
			e = &r.sources[i]
			break
		}
	}
	if e == nil {
		if len(r.sources) < cap(r.sources) {
			r.sources = r.sources[:len(r.sources)+1]
			e = &r.sources[len(r.sources)-1]
		} else {
			e = &r.sources[0]
			for i := range r.sources {
				if r.sources[i].used < e.used {
					e = &r.sources[i]
				}
			}
		}
		e.peer = from
		e.bucket.init(uint64(r.cfg.SourceBytesPerSecond), uint64(max(r.cfg.SourceBurstBytes, r.cfg.MaxPacketBytes)))
	}
	e.used = mono
	e.bucket.refill(mono)
	return &e.bucket
}

// Stats returns the counters.
func (r *Repairer) Stats() RepairStats { return r.stats }

// Answer answers NAK n from from, at monotonic time mono, as a says. The
// caller has checked the NAK's session and that FromSeq exists.
func (r *Repairer) Answer(mono int64, n *wire.Nak, from transport.Peer, a *Answer) {
	first, ok := a.Store.Oldest()
	if !ok {
		r.sendGone(from, n, a, 0)
		return
	}
	if n.FromSeq < first.FirstSeq || (n.FromSeq == first.FirstSeq && first.Fragment && first.FragFrom > n.FromOffset) {
		oldest := first.FirstSeq
		if first.Fragment && first.FragFrom > 0 {
			oldest++ // the oldest packet holds only the tail of its message
		}
		r.sendGone(from, n, a, oldest)
		return
	}
	// A second receiver asking for the same seq soon after the first means
	// the loss was shared (a switch, a slow host): one multicast answer
	// serves them all, and their pending NAKs are cancelled when it lands.
	multicast := r.cfg.MulticastRepairWindow > 0 && n.FromSeq == r.lastNakSeq &&
		from != r.lastNakPeer && mono-r.lastNakAt < int64(r.cfg.MulticastRepairWindow)
	r.lastNakSeq, r.lastNakPeer, r.lastNakAt = n.FromSeq, from, mono
	r.bucket.refill(mono)
	r.nak, r.answer = n, *a
	r.st = repairState{to: from, multicast: multicast, src: r.sourceBucket(mono, from)}
	a.Store.Range(n.FromSeq, a.ToSeq, r.onRepair)
	if multicast && r.st.sent > 0 {
		r.stats.RepairsMulticast++
	}
	r.stats.Retransmitted += uint64(r.st.sent)
	r.nak, r.answer.Store = nil, nil
}

// repairPacket sends one stored packet in answer to r.nak, or returns
// false when the answer is complete (past the hole, NakAnswerBytes, or the
// bandwidth cap).
func (r *Repairer) repairPacket(pkt []byte, m PacketInfo) bool {
	n := r.nak
	if m.FirstSeq == n.FromSeq && m.Count == 1 && m.Fragment && m.FragTo <= n.FromOffset {
		return true // a fragment the receiver already holds
	}
	if n.ToOffset != 0 && m.FirstSeq == n.FromSeq && m.Fragment && m.FragFrom >= n.ToOffset {
		return false // past the hole: the receiver holds the rest of FromSeq
	}
	if r.st.sent > 0 && r.st.bytes+len(pkt) > r.cfg.NakAnswerBytes {
		return false // the receiver asks again for the rest, which paces it
	}
	if r.st.src != nil && !r.st.src.has(len(pkt)) {
		r.stats.SourceThrottled++
		return false
	}
	if !r.bucket.take(len(pkt)) {
		r.stats.Throttled++
		return false
	}
	if r.st.src != nil {
		r.st.src.take(len(pkt))
	}
	if r.arena != nil {
		pkt = r.arena.copyOf(pkt)
	}
	if r.answer.Stamp {
		if e := r.answer.StampEpoch; e == 0 || wire.PacketEpoch(pkt) == e {
			wire.SetStable(pkt, r.answer.Stable)
		} else if end, ok := cutOf(r.answer.Cuts, wire.PacketEpoch(pkt)); ok {
			wire.SetStable(pkt, min(r.answer.Stable, end))
		} else if m.EpochEnd != 0 {
			wire.SetStable(pkt, min(r.answer.Stable, m.EpochEnd))
		}
	}
	wire.SetPacketFlags(pkt, wire.PacketRetransmit)
	if r.st.multicast {
		r.sink.Publish(pkt)
	} else {
		r.sink.SendTo(r.st.to, pkt)
	}
	r.st.sent++
	r.st.bytes += len(pkt)
	return true
}

func (r *Repairer) sendGone(to transport.Peer, n *wire.Nak, a *Answer, oldest uint64) {
	r.gone = wire.Gone{Epoch: a.Epoch, Session: a.Session, FromSeq: n.FromSeq, ToSeq: n.ToSeq, Oldest: oldest}
	buf := r.gbuf[:]
	if r.arena != nil {
		buf = r.arena.take(wire.GoneBytes)
	}
	pkt, err := wire.AppendGone(buf, &r.gone)
	if err != nil {
		panic("sequencer: gone buffer too small: " + err.Error())
	}
	r.stats.Gones++
	r.sink.SendTo(to, pkt)
}

// stepNak answers a NAK through the Repairer: from the ring, or, for seqs
// at or below the cut of an earlier epoch, from the history a new primary
// took over, never beyond the cut. The packets carry this primary's
// stable (the previous epoch's packet no more than the cut; an older
// epoch's no more than its own cut, see Answer.StampEpoch).
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
	a := &c.answer
	*a = Answer{Store: c.store, ToSeq: n.ToSeq, Epoch: c.epoch, Session: c.session, Stamp: true, Stable: c.stable}
	if n.FromSeq < c.epochStart && c.history != nil {
		// An earlier epoch's packet may carry records past the cut, which
		// no receiver may ever deliver: it claims no more than the cut,
		// and only the previous epoch's packets are stamped (the cuts
		// of older ones are not known here).
		a.Store, a.ToSeq, a.Stable = c.history, min(n.ToSeq, c.epochStart-1), min(c.stable, c.epochStart-1)
		a.StampEpoch, a.Cuts = c.epoch-1, c.cuts
	}
	c.repairer.Answer(c.mono, n, from, a)
	a.Store = nil
	return nil
}
