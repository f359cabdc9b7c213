package replayer

import (
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// RecordFunc receives one record of a Records walk and the epoch it
// belongs to; it returns false to stop. rec and its payload are valid
// only during the call.
type RecordFunc func(rec *wire.Record, epoch uint32) bool

// recordWalk is the state of a Records call, so that its packet handler
// is built once and the walk allocates nothing.
type recordWalk struct {
	from, to uint64
	fn       RecordFunc
	pkt      wire.Packet
	rec      wire.Record
	onPacket sequencer.PacketFunc
}

// Records calls fn, in order, for every record held with a seq in
// from..to (the fragments of a message one by one, as stored), with its
// epoch from the epoch table, until fn returns false. An archive replays
// epoch e exactly with Records(start of e, start of e+1 - 1). Like Range,
// it serves nothing at or past a corruption. It allocates nothing.
func (s *Store) Records(from, to uint64, fn RecordFunc) {
	w := &s.walk
	if w.onPacket == nil {
		w.onPacket = s.walkPacket
	}
	w.from, w.to, w.fn = from, to, fn
	s.Range(from, to, w.onPacket)
	w.fn = nil
}

func (s *Store) walkPacket(pkt []byte, info sequencer.PacketInfo) bool {
	w := &s.walk
	if err := wire.DecodePacket(pkt, &w.pkt); err != nil {
		// Open decoded this packet and its checksum held just now: only
		// bytes changed on disk with a matching CRC (not a cryptographic
		// hash) get here. Serve nothing from it on, as for a bad checksum.
		if s.corrupt == nil {
			s.corrupt = &Corruption{Seq: info.FirstSeq, Reason: "stored packet no longer decodes: " + err.Error()}
			s.limit = info.FirstSeq
			s.active = false
		}
		return false
	}
	cut := s.cutFrom(w.pkt.Epoch)
	for w.pkt.Next(&w.rec) {
		seq := w.rec.Seq
		if seq < w.from || seq >= cut {
			continue // before the range, or above its epoch's cut
		}
		if seq > w.to {
			return false
		}
		epoch, _ := s.epochOf(seq)
		if !w.fn(&w.rec, epoch) {
			return false
		}
	}
	return true
}
