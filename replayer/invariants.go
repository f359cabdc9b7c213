package replayer

import "fmt"

// The checks below run when internal/invariants is Enabled (-race, or
// -tags invariants): checkIndex each time a frame is added to a segment
// (appended, or found by Open), checkWrite after each Append. Each is
// O(1). They panic: a broken one is a bug here, never bad data on disk
// (Open and Range report that as a Corruption).

// checkIndex checks seg's sparse index after a frame was added: Range's
// binary searches (Store.Range over segments, segment.start over
// entries) find the right frame only while entries go forward in both
// offset and seq and lie no further apart than IndexIntervalBytes and a
// frame.
func (s *Store) checkIndex(seg *segment) {
	k := len(seg.idx)
	if k == 0 {
		panic(fmt.Sprintf("replayer: segment %d holds a frame and no index entry", seg.ordinal))
	}
	first, last := seg.idx[0], seg.idx[k-1]
	switch {
	case first.off != SegmentHeaderBytes || first.firstSeq != seg.firstSeq:
		panic(fmt.Sprintf("replayer: segment %d (first seq %d) indexes its first frame at %d, seq %d", seg.ordinal, seg.firstSeq, first.off, first.firstSeq))
	case last.off != seg.lastIdx || last.off >= seg.size:
		panic(fmt.Sprintf("replayer: segment %d: newest index entry at %d, lastIdx %d, size %d", seg.ordinal, last.off, seg.lastIdx, seg.size))
	case seg.size-seg.lastIdx > int64(s.cfg.IndexIntervalBytes+FrameHeaderBytes+s.cfg.MaxPacketBytes):
		panic(fmt.Sprintf("replayer: segment %d: %d bytes after the newest index entry (interval %d)", seg.ordinal, seg.size-seg.lastIdx, s.cfg.IndexIntervalBytes))
	case seg.reach < seg.last.LastSeq():
		panic(fmt.Sprintf("replayer: segment %d reaches seq %d, its newest packet ends at %d", seg.ordinal, seg.reach, seg.last.LastSeq()))
	case s.newest != seg.last || s.tail.lastSeq != s.newest.LastSeq():
		panic(fmt.Sprintf("replayer: newest packet %+v, segment's %+v, tail at seq %d", s.newest, seg.last, s.tail.lastSeq))
	}
	if k >= 2 {
		if p := seg.idx[k-2]; p.off >= last.off || p.firstSeq > last.firstSeq {
			panic(fmt.Sprintf("replayer: segment %d: index entry (%d, seq %d) after (%d, seq %d)", seg.ordinal, last.off, last.firstSeq, p.off, p.firstSeq))
		}
	}
	if i := len(s.segs) - 1; i > 0 && &s.segs[i] == seg && s.segs[i-1].reach > seg.reach {
		panic(fmt.Sprintf("replayer: segment %d reaches seq %d, below the %d of the one before", seg.ordinal, seg.reach, s.segs[i-1].reach))
	}
}

// checkWrite checks the write path after an Append: the active segment's
// logical end is its bytes in the file plus those waiting in wbuf, and
// nothing not held is called durable.
func (s *Store) checkWrite() {
	seg := &s.segs[len(s.segs)-1]
	switch {
	case seg.size != seg.written+int64(len(s.wbuf)):
		panic(fmt.Sprintf("replayer: segment %d: size %d, written %d + %d waiting", seg.ordinal, seg.size, seg.written, len(s.wbuf)))
	case s.durable > s.tail.contiguous():
		panic(fmt.Sprintf("replayer: durable %d beyond contiguous %d", s.durable, s.tail.contiguous()))
	case len(s.wbuf) > 0 && s.pendSeq > s.newest.FirstSeq:
		panic(fmt.Sprintf("replayer: frames wait from seq %d, the newest starts at %d", s.pendSeq, s.newest.FirstSeq))
	}
}
