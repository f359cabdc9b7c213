package sim

import (
	"bytes"
	"errors"
	"sort"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// Epoch changes, simulated until the Raft group exists: the primary dies
// and a new one takes over at a cut chosen anywhere from the stable seq to
// the last seq published (a quorum holds at least the stable prefix; what
// lies above the cut is lost). The new primary starts from the State of
// the surviving stream and answers NAKs below the cut from the surviving
// packets (what the standbys persisted). Safe nodes never delivered past
// stable, so they go on; a fast node that delivered a cut message must
// stop with ErrDiverged, and is then restarted as a new process.

// history is the surviving stream's packets in publish order, as the
// standbys persisted them; it implements sequencer.RetransmitStore for
// the new primary.
type history struct {
	pkts []histPacket
}

type histPacket struct {
	b    []byte
	info sequencer.PacketInfo
}

func (h *history) Put(pkt []byte, info sequencer.PacketInfo) {
	h.pkts = append(h.pkts, histPacket{b: bytes.Clone(pkt), info: info})
}

func (h *history) Oldest() (sequencer.PacketInfo, bool) {
	if len(h.pkts) == 0 {
		return sequencer.PacketInfo{}, false
	}
	return h.pkts[0].info, true
}

func (h *history) Newest() (sequencer.PacketInfo, bool) {
	if len(h.pkts) == 0 {
		return sequencer.PacketInfo{}, false
	}
	return h.pkts[len(h.pkts)-1].info, true
}

func (h *history) Range(from, to uint64, fn sequencer.PacketFunc) {
	i := sort.Search(len(h.pkts), func(k int) bool { return h.pkts[k].info.LastSeq() >= from })
	for ; i < len(h.pkts) && h.pkts[i].info.FirstSeq <= to; i++ {
		if !fn(h.pkts[i].b, h.pkts[i].info) {
			return
		}
	}
}

// cut forgets what the epoch change at c cut away: the packets that start
// past c, and the records past c of a packet that straddles it (it is
// rewritten without them), so that no repair ever carries a cut record.
func (h *history) cut(c uint64) {
	n := 0
	for _, p := range h.pkts {
		if p.info.FirstSeq > c {
			continue
		}
		if p.info.LastSeq() > c {
			p = truncated(p, c)
		}
		h.pkts[n] = p
		n++
	}
	clear(h.pkts[n:])
	h.pkts = h.pkts[:n]
}

// truncated rewrites packet p with only its records up to seq c.
func truncated(p histPacket, c uint64) histPacket {
	var in wire.Packet
	if err := wire.DecodePacket(p.b, &in); err != nil {
		panic("sim: history holds a packet that does not decode: " + err.Error())
	}
	var w wire.PacketWriter
	buf := make([]byte, len(p.b))
	if err := w.Reset(buf, in.Kind, in.Epoch, in.Session, in.FirstSeq, in.BaseTime, in.EpochStart); err != nil {
		panic(err)
	}
	var r wire.Record
	for in.Next(&r) && r.Seq <= c {
		if err := w.Append(&r); err != nil {
			panic(err)
		}
	}
	out := w.Bytes()
	wire.SetStable(out, in.Stable)
	p.b = out
	p.info.Count = w.Count()
	return p
}

// keep records a first-sent packet of the stream in the history.
func (w *world) keep(pkt []byte) {
	var p wire.Packet
	var r wire.Record
	if wire.DecodePacket(pkt, &p) != nil || !p.Next(&r) {
		return // a heartbeat (record checked the packet)
	}
	info := sequencer.PacketInfo{FirstSeq: p.FirstSeq, Count: p.Count, FragTo: r.Total}
	if r.Fragment() {
		info.Fragment, info.FragFrom, info.FragTo = true, r.Offset, r.Offset+uint32(len(r.Payload))
	}
	w.hist.Put(pkt, info)
	if w.cl != nil {
		w.cl.persist(pkt, info)
	}
}

// failover replaces the primary, now and then, at most three times a run.
func (w *world) failover() {
	if !w.cfg.EpochChanges || len(w.cuts) >= 3 || w.rng.IntN(8000) != 0 {
		return
	}
	stable, published := w.seq.Stable(), w.seq.Published()
	lo := max(stable, w.epochStart)
	if published < lo {
		return
	}
	cut := lo + w.rng.Uint64N(published-lo+1)
	st, err := w.stateAt(cut)
	if err != nil {
		w.fail("epoch change at %d: %v", cut, err)
		return
	}
	cfg := w.sc
	cfg.Epoch = w.epoch + 1
	cfg.FirstSeq = cut + 1
	cfg.StartTime = w.log[len(w.log)-1].time // the last stamp any node saw
	w.hist.cut(cut)
	seq, err := sequencer.NewPrimarySinkShell(cfg, w, sequencer.Takeover{State: st, History: &w.hist})
	if err != nil {
		w.fail("epoch change at %d: %v", cut, err)
		return
	}
	// Fast nodes that delivered past the cut must diverge.
	for _, n := range w.nodes {
		if n.delivered > cut {
			n.mustDiverge = true
		}
	}
	w.cuts = append(w.cuts, epochCut{epoch: w.epoch, last: cut, lost: append([]entry(nil), w.log[cut:]...)})
	w.seq, w.epoch, w.epochStart = seq, cfg.Epoch, cut+1
	w.log = w.log[:cut]
	w.acks = nil
	w.standby = sequencer.NewState(w.sc.MaxSenders, 1)
	if err := w.standby.Restore(st.Snapshot()); err != nil {
		w.fail("standby restore: %v", err)
	}
	w.checkedSeq = cut
}

// epochCut is the last seq of an epoch that ended, and the messages it
// had published past that seq: a fast node may deliver them (from packets
// still in flight) before it learns of the new epoch, and must diverge.
type epochCut struct {
	epoch uint32
	last  uint64
	lost  []entry
}

// cutEntry is the truth about seq of an ended epoch that its cut lost.
func (w *world) cutEntry(epoch uint32, seq uint64) (*entry, bool) {
	for i := range w.cuts {
		c := &w.cuts[i]
		if c.epoch == epoch && seq > c.last && seq-c.last <= uint64(len(c.lost)) {
			return &c.lost[seq-c.last-1], true
		}
	}
	return nil, false
}

// cutOf is the last seq of an ended epoch, or false for the current one.
func (w *world) cutOf(epoch uint32) (uint64, bool) {
	for _, c := range w.cuts {
		if c.epoch == epoch {
			return c.last, true
		}
	}
	return 0, false
}

// stateAt rebuilds the stream-derived State up to seq cut from the
// surviving packets, as a standby would.
func (w *world) stateAt(cut uint64) (*sequencer.State, error) {
	st := sequencer.NewState(w.sc.MaxSenders, 1)
	var p wire.Packet
	var r wire.Record
	for _, h := range w.hist.pkts {
		if err := wire.DecodePacket(h.b, &p); err != nil {
			return nil, err
		}
		for p.Next(&r) {
			if r.Seq <= st.LastSeq() || r.Seq > cut {
				continue // a later fragment of a message applied, or cut
			}
			if err := st.Apply(&r); err != nil {
				return nil, err
			}
		}
	}
	return st, nil
}

// diverged handles a node's fatal error: a fast node that delivered a
// message an epoch change cut must stop with ErrDiverged, and is then
// restarted as a new process (an application would rebuild from a
// snapshot or the stream). Any other error is a failure.
func (n *simNode) diverged(err error) bool {
	if !n.mustDiverge || !errors.Is(err, node.ErrDiverged) {
		return false
	}
	n.w.divergences++
	n.mustDiverge = false
	n.restart()
	return true
}
