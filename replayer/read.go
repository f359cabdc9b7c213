package replayer

import "github.com/seqd/seqd/sequencer"

// Range calls fn, oldest first, for every packet held that carries a
// record of from..to (inclusive), until fn returns false
// (sequencer.RetransmitStore). Each frame's checksum is checked as it is
// read: a frame that fails it is recorded as a Corruption (see
// Corruption) and neither it nor anything after it is served, now or
// later. The pkt handed to fn is a copy the callee may patch. Range
// allocates nothing; it writes the waiting frames to the file first when
// the range reaches them.
func (s *Store) Range(from, to uint64, fn sequencer.PacketFunc) {
	if !s.tail.have || from > to || s.closed || to < s.oldest.FirstSeq || from > s.tail.lastSeq {
		return
	}
	// A NAK wants a few packets: read small first, more as the range goes
	// on (sequential reads of a long range use the whole buffer).
	s.fillBytes = min(len(s.rbuf), firstFillBytes)
	if len(s.wbuf) > 0 && to >= s.pendSeq {
		if err := s.flush(); err != nil {
			return // the store failed: Err says why
		}
	}
	// The first segment whose newest packet reaches from: packets' first
	// and last seqs never decrease, so it holds the first packet wanted.
	lo, hi := 0, len(s.segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.segs[m].reach < from {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for si := lo; si < len(s.segs) && si <= s.stopSeg; si++ {
		seg := &s.segs[si]
		off := seg.start(from)
		for off < seg.written {
			if si == s.stopSeg && off >= s.stopOff {
				return
			}
			frame, err := s.readFrame(si, off)
			if err != nil {
				s.corruptAt(si, off, err)
				return
			}
			pkt := frame[FrameHeaderBytes:]
			info := packetInfo(pkt)
			off += int64(len(frame))
			e := packetEpoch(pkt)
			if info.FirstSeq >= s.cutFrom(e) {
				continue // a deposed primary's packet above its epoch's cut
			}
			info.EpochEnd = epochEndTable(s.epochs, e)
			if s.limit != 0 && info.LastSeq() >= s.limit {
				return
			}
			if info.LastSeq() < from {
				continue
			}
			if info.FirstSeq > to {
				return
			}
			s.out = append(s.out[:0], frame[FrameHeaderBytes:]...)
			if !fn(s.out, info) {
				return
			}
		}
	}
}

// start is the offset of the frame to read first for a range from seq
// from: that of the newest index entry whose frame starts below from
// (every earlier frame ends below it), or the first frame.
func (seg *segment) start(from uint64) int64 {
	lo, hi := 0, len(seg.idx)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if seg.idx[m].firstSeq < from {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return SegmentHeaderBytes
	}
	return seg.idx[lo-1].off
}

// readFrame returns the checked frame at off of segment si, a view of
// rbuf.
func (s *Store) readFrame(si int, off int64) ([]byte, error) {
	if si != s.rseg || off < s.roff || off+FrameHeaderBytes > s.roff+int64(s.rn) {
		if err := s.fill(si, off, FrameHeaderBytes); err != nil {
			return nil, err
		}
	}
	b := s.rbuf[off-s.roff : s.rn]
	if len(b) < FrameHeaderBytes {
		return nil, errShortFrame
	}
	n, err := frameLen(b, s.cfg.MaxPacketBytes)
	if err != nil {
		return nil, err
	}
	if len(b) < n {
		if err := s.fill(si, off, n); err != nil {
			return nil, err
		}
		b = s.rbuf[:s.rn]
		if len(b) < n {
			return nil, errShortFrame
		}
	}
	if _, err := checkFrame(b[:n]); err != nil {
		return nil, err
	}
	return b[:n], nil
}

// firstFillBytes is the first read of a Range.
const firstFillBytes = 16 << 10

// fill reads segment si into rbuf from off: s.fillBytes, at least need
// bytes, and doubles s.fillBytes for the next fill.
func (s *Store) fill(si int, off int64, need int) error {
	seg := &s.segs[si]
	n := int64(max(s.fillBytes, need))
	s.fillBytes = min(len(s.rbuf), 2*s.fillBytes)
	if rest := seg.written - off; rest < n {
		n = rest
	}
	s.rseg, s.roff, s.rn = -1, 0, 0
	got, err := seg.f.ReadAt(s.rbuf[:n], off)
	if int64(got) < n {
		if err == nil {
			err = errShortFrame
		}
		return err
	}
	s.rseg, s.roff, s.rn = si, off, got
	return nil
}

// corruptAt records that the frame at off of segment si failed a check on
// read (the disk changed after Open): the store serves nothing from that
// frame on and takes no appends. It rereads the segment up to off to name
// the first seq not served and the newest packet still served.
func (s *Store) corruptAt(si int, off int64, cause error) {
	seg := &s.segs[si]
	var t tailState
	var last sequencer.PacketInfo
	if si > 0 {
		t, last = s.segs[si-1].tail, s.segs[si-1].last
	}
	read := false
	for o := int64(SegmentHeaderBytes); o < off; {
		frame, err := s.readFrame(si, o)
		if err != nil {
			break
		}
		if _, _, err := decodeFrame(frame, s.cfg.MaxPacketBytes, &s.pkt); err != nil {
			break
		}
		_, _, t = scanRecords(&s.pkt, &s.rec)
		last = packetInfo(frame[FrameHeaderBytes:])
		o += int64(len(frame))
		read = true
	}
	seq := seg.firstSeq
	if t.have {
		seq = t.next()
	}
	if !read && t.have && t.next() > seg.firstSeq {
		// The segment starts an epoch that cut the stream below the
		// previous segment's tail: what is served ends before its start.
		seq = seg.firstSeq
		t = tailState{have: seq > 1, lastSeq: seq - 1, whole: true}
	}
	s.limit = seq
	s.tail, s.newest = t, last
	s.durable = min(s.durable, t.contiguous())
	s.active = false
	s.stopSeg, s.stopOff = si, off
	s.corrupt = &Corruption{File: seg.path, Offset: off, Seq: seq, Reason: cause.Error()}
}
