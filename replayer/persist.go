package replayer

import (
	"errors"
	"fmt"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// Persister is the persist half of following a stream, shared by every
// follower that stores it (the replayer's Service, the cluster's standby,
// next the bridge): it feeds a Store from a receiver's Ready.Persist
// frames. A receiver hands over every frame that brought it new records,
// in the order they arrived: a repair comes after the packets that
// followed the hole, and records may not be stable yet. A Store takes
// packets only in stream order and gap-free, and a replayer stores only
// what is stable (stable records are never cut by a failover, so what it
// serves is never taken back, and it never holds a record a later epoch
// replaced). The Persister holds frames back until both hold:
//
//   - in order: sorted by first seq (and fragment offset), a frame is
//     appended when it follows the newest packet held;
//   - delivered: its last seq is at or below the delivered seq its owner
//     passes (a replayer: the receiver's, which in Safe mode is whole,
//     contiguous and stable; a standby, which stores on arrival: any).
//
// A packet of an earlier epoch that reaches past a later epoch's start
// (the failover cut it there; the receiver dropped those records and
// delivered the new primary's) is stored without them: see cut.
//
// A frame that can go at once (delivered, next in line, nothing held
// before it, not cut) is appended from the receiver's view, with no copy. Frames held back wait
// in a Reorder (copies in recycled buffers), and a cut one is rewritten
// in a buffer of the Persister's, so a warm Persister allocates nothing.
//
// It is pure: no clock, no goroutine; the owner calls Offer for each
// Ready.Persist frame and Drain whenever the delivered seq moved. Not
// safe for concurrent use.
type Persister struct {
	cfg  PersistConfig
	held Reorder
	// starts are the epoch starts seen in persisted headers (and those
	// the owner adds): a packet of epoch e keeps no record at or past the
	// start of a later epoch (see cut).
	starts  EpochStarts
	scratch []byte // a cut frame that goes at once, rewritten
	stats   PersistStats
}

// PersistConfig sets up a Persister.
type PersistConfig struct {
	// MaxHeldBytes bounds the frames held back; beyond it Offer fails
	// with ErrPendingFull.
	MaxHeldBytes int
	// MaxPacketBytes is the largest packet (Config.MaxPacketBytes): the
	// size of the buffer a cut frame is rewritten in.
	MaxPacketBytes int
	// FromSeqOne: an empty store takes a packet only at seq 1 (a
	// standby rebuilds its State from the store, which must start there);
	// an earlier one waits.
	FromSeqOne bool
	// WaitForGaps: a held frame that does not follow the store waits
	// (a store that takes records on arrival fills a gap later, by a
	// repair or a catch-up). Without it the gap is ErrHole: in Safe mode
	// everything delivered came through here, so the hole never fills.
	WaitForGaps bool
	// GuardCutTail: a store whose newest records are an older epoch's
	// past a newer epoch's start (a standby's store that took records a
	// failover then cut, being healed) takes nothing of that epoch until
	// its first packet restarts the store at its start
	// (Store.BeginEpoch's table, Store.EpochOf).
	GuardCutTail bool
}

// PersistStats count what the Persister did.
type PersistStats struct {
	Appended   uint64 // packets appended to the store
	Direct     uint64 // of those, appended with no copy
	Duplicates uint64 // frames dropped: the store holds them already
	Cut        uint64 // packets of an earlier epoch stored without the records its successor cut (or dropped)
	CutWhole   uint64 // of Cut, packets dropped: every record was past the cut
	Holds      uint64 // frames held back (copied into the Reorder)
	HeldMax    int    // most frames held back at once
	Held       int    // frames held back now
	HeldBytes  int    // their bytes
}

// Init empties p and configures it.
func (p *Persister) Init(cfg PersistConfig) {
	*p = Persister{cfg: cfg, scratch: make([]byte, 0, max(cfg.MaxPacketBytes, wire.PacketHeaderBytes))}
	p.held.Init(cfg.MaxHeldBytes)
}

// Epochs is the table of epoch starts the Persister cuts by: its owner
// adds what it learns elsewhere (the store's table, the failover state).
func (p *Persister) Epochs() *EpochStarts { return &p.starts }

// Offer takes one Ready.Persist frame; delivered is the owner's delivered
// seq after the step. The frame is only read during the call.
func (p *Persister) Offer(s *Store, frame []byte, delivered uint64) error {
	info := packetInfo(frame)
	last := info.LastSeq()
	epoch := packetEpoch(frame)
	p.starts.Add(epoch, le.Uint64(frame[48:]))
	if last <= delivered && p.first(info) {
		buf, cut := frame, p.cuts(epoch, last)
		if cut {
			p.scratch = append(p.scratch[:0], frame...)
			buf = p.cut(p.scratch, epoch)
		}
		switch err := p.append(s, buf, frame); {
		case err == nil:
			p.counted(buf, cut)
			if !cut {
				p.stats.Direct++
			}
			return p.Drain(s, delivered)
		case errors.Is(err, ErrDuplicate):
			p.stats.Duplicates++
			return nil
		case !errors.Is(err, ErrGap):
			return err
		}
	}
	return p.hold(frame, info.FirstSeq)
}

// first reports whether no frame held comes before the one of info in
// the stream (an empty store takes any packet first: a held earlier
// one must go before it).
func (p *Persister) first(info sequencer.PacketInfo) bool {
	if p.held.Len() == 0 {
		return true
	}
	h := p.held.First()
	if info.FirstSeq != h.FirstSeq {
		return info.FirstSeq < h.FirstSeq
	}
	off := uint32(0)
	if info.Fragment {
		off = info.FragFrom
	}
	return off < h.Offset
}

// counted counts a frame stored (or, buf nil, dropped) cut.
func (p *Persister) counted(buf []byte, cut bool) {
	if cut {
		p.stats.Cut++
		if buf == nil {
			p.stats.CutWhole++
		}
	}
}

// append appends buf (frame, or its cut rewrite; nil: cut away whole)
// under the rules of the config: it reports ErrGap for a frame that must
// wait.
func (p *Persister) append(s *Store, buf, frame []byte) error {
	if buf == nil {
		return nil // counted by cut
	}
	first := le.Uint64(frame[24:])
	if p.cfg.FromSeqOne && first != 1 {
		if _, ok := s.Newest(); !ok {
			return ErrGap
		}
	}
	if p.cfg.GuardCutTail {
		start := le.Uint64(frame[48:])
		if held := s.Contiguous(); start <= held && first != start {
			// The store's tail past this epoch's start is a cut one
			// (being healed): nothing of the epoch goes after it; the
			// epoch's first packet restarts the store at its start, and
			// this one waits.
			if e, ok := s.EpochOf(held); ok && e < packetEpoch(frame) {
				return ErrGap
			}
		}
	}
	if err := s.Append(buf); err != nil {
		return err
	}
	p.stats.Appended++
	return nil
}

// hold copies frame into the Reorder.
func (p *Persister) hold(frame []byte, first uint64) error {
	same, err := p.held.Put(frame)
	if same {
		// The same first record twice: a duplicate, or the packet of a
		// newer epoch at a seq an older epoch's packet also reached (cut
		// there): the newest epoch's wins.
		p.stats.Duplicates++
	}
	if errors.Is(err, ErrPendingFull) {
		waiting := first
		if p.held.Len() > 0 {
			waiting = min(waiting, p.held.First().FirstSeq)
		}
		return fmt.Errorf("%w: %d bytes held waiting for seq %d (MaxPendingBytes %d)", err, p.held.Bytes(), waiting, p.held.maxBytes)
	}
	if err != nil {
		return err
	}
	p.stats.Holds++
	p.stats.HeldMax = max(p.stats.HeldMax, p.held.Len())
	return nil
}

// Drain appends the held frames that are next in line and delivered.
func (p *Persister) Drain(s *Store, delivered uint64) error {
	return p.drain(s, delivered, ^uint64(0))
}

// DrainTo is Drain keeping nothing above seq limit (a catch-up to a
// cut): a held frame wholly above it is dropped, one that straddles it
// is stored without its records above it.
func (p *Persister) DrainTo(s *Store, limit uint64) error {
	return p.drain(s, ^uint64(0), limit)
}

func (p *Persister) drain(s *Store, delivered, limit uint64) error {
	for p.held.Len() > 0 {
		h := p.held.First()
		if h.FirstSeq > limit {
			p.held.Drop()
			p.stats.Duplicates++
			continue
		}
		if h.LastSeq > delivered {
			return nil
		}
		buf, cut := h.Frame, false
		if h.LastSeq > limit {
			buf, cut = cutBelow(buf, limit+1), true
		}
		if buf != nil && p.cuts(h.Epoch, h.LastSeq) {
			buf, cut = p.cut(buf, h.Epoch), true
		}
		err := p.append(s, buf, h.Frame)
		switch {
		case err == nil:
			p.counted(buf, cut)
		case errors.Is(err, ErrDuplicate):
			p.stats.Duplicates++
		case errors.Is(err, ErrGap) && p.cfg.WaitForGaps:
			return nil
		case errors.Is(err, ErrGap):
			// Everything below h was delivered, so it came through here
			// and is held or stored: the store's hole will never fill.
			return fmt.Errorf("%w: the store holds up to seq %d, the next frame the receiver delivered starts at seq %d (offset %d)", ErrHole, s.Contiguous(), h.FirstSeq, h.Offset)
		default:
			return err
		}
		p.held.Drop()
	}
	return nil
}

// AppendTo appends frame to s without its records above limit (a
// catch-up's fetched packet, cut at the cut), then drains what was held
// up to limit. It returns the store's error (ErrDuplicate, ErrGap) for
// the caller to judge. The frame is only read.
func (p *Persister) AppendTo(s *Store, frame []byte, limit uint64) error {
	info := packetInfo(frame)
	buf, cut := frame, info.LastSeq() > limit
	if cut {
		p.scratch = append(p.scratch[:0], frame...)
		if buf = cutBelow(p.scratch, limit+1); buf == nil {
			p.counted(nil, true)
			return nil
		}
	}
	if err := s.Append(buf); err != nil {
		return err
	}
	p.stats.Appended++
	p.counted(buf, cut)
	return p.DrainTo(s, limit)
}

// Appended is Stats().Appended, for a caller that watches it per frame.
func (p *Persister) Appended() uint64 { return p.stats.Appended }

// Stats returns the counters.
func (p *Persister) Stats() PersistStats {
	st := p.stats
	st.Held, st.HeldBytes = p.held.Len(), p.held.Bytes()
	return st
}

// cuts reports whether a packet of epoch e ending at last carries records
// a later epoch cut: a failover's new primary started at or below last.
// The receiver dropped those records (it delivered the new epoch's at
// their seqs), so the packet is stored without them.
func (p *Persister) cuts(e uint32, last uint64) bool {
	next, ok := p.starts.After(e)
	return ok && last >= next
}

// cut rewrites pkt (a packet of epoch e, a copy of the Persister's) in
// place without its records at or past the next epoch's start, or
// returns nil when none is left.
func (p *Persister) cut(pkt []byte, e uint32) []byte {
	next, _ := p.starts.After(e)
	return cutBelow(pkt, next)
}

// cutBelow rewrites the data packet pkt in place without its records at
// or past seq next, or returns nil when none is left. Records follow the
// header back to back with seqs firstSeq, firstSeq+1, ...: the packet's
// first k records are a prefix of its bytes, and only the count changes
// (and the stable seq, which must not claim a record the packet no
// longer carries past its own end).
func cutBelow(pkt []byte, next uint64) []byte {
	first := le.Uint64(pkt[24:])
	if next <= first {
		return nil
	}
	keep := int(next - first)
	if keep >= int(le.Uint16(pkt[20:])) {
		return pkt
	}
	off := int(le.Uint16(pkt[4:]))
	for i := 0; i < keep; i++ {
		n := wire.RecordHeaderBytes + int(le.Uint16(pkt[off:]))
		if pkt[off+2]&wire.FlagFragment != 0 {
			n += wire.FragmentHeaderBytes
		}
		off += n
	}
	le.PutUint16(pkt[20:], uint16(keep))
	if le.Uint64(pkt[32:]) >= next {
		wire.SetStable(pkt, next-1)
	}
	return pkt[:off]
}
