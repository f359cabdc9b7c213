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
	return nil
}
