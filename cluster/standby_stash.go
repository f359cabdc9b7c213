package cluster

import (
	"slices"

	"github.com/seqd/seqd/wire"
)

// stash holds copies of stream packets that arrived ahead of a gap, in
// stream order (first seq, then fragment offset), until the store can
// take them. Buffers are reused; the total is bounded by bytes.
type stash struct {
	list  []stashed
	free  [][]byte
	bytes int
	limit int
	pkt   wire.Packet
	rec   wire.Record
}

type stashed struct {
	first uint64
	off   uint32
	epoch uint32
	b     []byte
}

func (s *stash) init(limit int) { s.limit = limit }

func (s *stash) len() int { return len(s.list) }

// put copies p into the stash. A packet already there is kept once, but
// a newer epoch's packet at the same position replaces an older one's
// (the deposed primary's record there was cut; the new primary's wins).
func (s *stash) put(p []byte) error {
	if err := wire.DecodePacket(p, &s.pkt); err != nil {
		return err
	}
	var off uint32
	if s.pkt.Next(&s.rec) {
		off = s.rec.Offset
	}
	first := s.pkt.FirstSeq
	i, found := slices.BinarySearchFunc(s.list, stashed{first: first, off: off}, func(a, b stashed) int {
		switch {
		case a.first != b.first:
			if a.first < b.first {
				return -1
			}
			return 1
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	epoch := s.pkt.Epoch
	if found && epoch <= s.list[i].epoch {
		return nil
	}
	old := 0
	if found {
		old = len(s.list[i].b)
	}
	if s.bytes-old+len(p) > s.limit {
		return ErrStashFull
	}
	if found {
		s.list[i].b = append(s.list[i].b[:0], p...)
		s.list[i].epoch = epoch
		s.bytes += len(p) - old
		return nil
	}
	var b []byte
	if n := len(s.free); n > 0 {
		b, s.free = s.free[n-1][:0], s.free[:n-1]
	}
	b = append(b, p...)
	s.list = slices.Insert(s.list, i, stashed{first: first, off: off, epoch: epoch, b: b})
	s.bytes += len(p)
	return nil
}

// first is the earliest packet held.
func (s *stash) first() []byte { return s.list[0].b }

// drop forgets the earliest packet and keeps its buffer for reuse.
func (s *stash) drop() {
	b := s.list[0].b
	s.bytes -= len(b)
	s.list = slices.Delete(s.list, 0, 1)
	if len(s.free) < 64 {
		s.free = append(s.free, b)
	}
}

// epochStarts is the table of epoch starts seen in the stream's headers,
// so a packet of an older epoch is cut where the next epoch begins.
type epochStarts struct {
	list []epochStart // ascending by epoch; bounded
}

type epochStart struct {
	epoch uint32
	start uint64
}

// maxEpochStarts bounds the table (the oldest are forgotten): a repair
// reaches back a few epochs at most.
const maxEpochStarts = 64

func (t *epochStarts) add(epoch uint32, start uint64) {
	n := len(t.list)
	if n > 0 && epoch <= t.list[n-1].epoch {
		return // known (or older: the table grows with the stream)
	}
	if n == maxEpochStarts {
		t.list = slices.Delete(t.list, 0, 1)
	}
	t.list = append(t.list, epochStart{epoch, start})
}

// startAfter is the start of the first epoch after e that the table
// knows, which is where e's records end.
func (t *epochStarts) startAfter(e uint32) (uint64, bool) {
	for _, x := range t.list {
		if x.epoch > e {
			return x.start, true
		}
	}
	return 0, false
}

// trimPacket rewrites the data packet p with only its records up to seq
// last, into dst (grown as needed), keeping its header fields.
func trimPacket(dst, p []byte, last uint64) ([]byte, error) {
	var in wire.Packet
	if err := wire.DecodePacket(p, &in); err != nil {
		return nil, err
	}
	dst = slices.Grow(dst[:0], len(p))[:len(p)]
	var w wire.PacketWriter
	if err := w.Reset(dst, in.Kind, in.Epoch, in.Session, in.FirstSeq, in.BaseTime, in.EpochStart); err != nil {
		return nil, err
	}
	var r wire.Record
	for in.Next(&r) && r.Seq <= last {
		if err := w.Append(&r); err != nil {
			return nil, err
		}
	}
	out := w.Bytes()
	wire.SetStable(out, min(in.Stable, last))
	wire.SetPacketFlags(out, in.Flags)
	return out, nil
}
