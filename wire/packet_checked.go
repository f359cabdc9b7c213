package wire

// DecodeCheckedPacket fills p from b, a copy of bytes that DecodePacket
// accepted before, reading only the header: the records are not
// validated again. It is for a receiver that holds a packet it decoded
// on arrival and reads it out later (a safe node's hold waiting for
// stable), where the second walk over every record header, on bytes that
// have left the caches meanwhile, cost as much as the first decode and
// the delivery together. On bytes DecodePacket never accepted, Next may
// panic; DecodeCheckedPacket itself checks only that b holds a header.
func DecodeCheckedPacket(b []byte, p *Packet) error {
	if len(b) < PacketHeaderBytes {
		return ErrShort
	}
	hdr := HeaderLen(b)
	if hdr < PacketHeaderBytes || hdr > len(b) {
		return ErrHeader
	}
	p.Kind = Kind(b[3])
	p.Flags = le.Uint16(b[offPktFlags:])
	p.Session = le.Uint64(b[offPktSession:])
	p.Epoch = le.Uint32(b[offPktEpoch:])
	p.Count = int(le.Uint16(b[offPktCount:]))
	p.FirstSeq = le.Uint64(b[offPktFirstSeq:])
	p.Stable = le.Uint64(b[offPktStable:])
	p.BaseTime = int64(le.Uint64(b[offPktBaseTime:]))
	p.EpochStart = le.Uint64(b[offPktEpochStart:])
	p.body = b[hdr:]
	p.next = p.FirstSeq
	p.last = nil
	return nil
}

// Last fills r with the packet's last record, found when DecodePacket
// validated the packet, without reading the records before it (a store
// appending a packet needs its first and last records only: a second walk
// over every record header of a 64 KiB packet cost a primary a tenth of
// its store write). It consumes the packet: Next returns nothing after
// it. False when the packet has no record, or was decoded by
// DecodeCheckedPacket (which does not find the last record): walk it with
// Next then.
func (p *Packet) Last(r *Record) bool {
	b := p.last
	if len(b) == 0 {
		return false
	}
	n := int(le.Uint16(b))
	r.Flags = b[2]
	r.Instance = b[3]
	r.Time = p.BaseTime + int64(le.Uint32(b[4:]))
	r.Account = Account(le.Uint64(b[8:]))
	r.CmdSeq = le.Uint64(b[16:])
	r.Seq = p.FirstSeq + uint64(p.Count) - 1
	h := RecordHeaderBytes
	if r.Flags&FlagFragment != 0 {
		r.Total = le.Uint32(b[24:])
		r.Offset = le.Uint32(b[28:])
		h += FragmentHeaderBytes
	} else {
		r.Total = uint32(n)
		r.Offset = 0
	}
	r.Payload = b[h : h+n : h+n]
	p.body = p.body[len(p.body):]
	p.next = r.Seq + 1
	return true
}
