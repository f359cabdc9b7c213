package replayer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// The on-disk layout; doc.go describes it in full.
const (
	// SegmentHeaderBytes is the size of a segment file's header.
	SegmentHeaderBytes = 64
	// FrameHeaderBytes is the size of the header before each packet.
	FrameHeaderBytes = 16
	// FormatVersion is the segment format this package writes and reads.
	FormatVersion = 1
	// MaxFramePacketBytes bounds the packet of one frame in any segment.
	MaxFramePacketBytes = 1 << 20

	// segFlagEpochStart marks a segment that begins epoch Epoch (header
	// bytes 48..51) at its firstSeq: written by Store.BeginEpoch, which
	// records an epoch start without the epoch's first packet. An older
	// reader refuses the flag (no flags were defined) rather than
	// misreading the segment.
	segFlagEpochStart = 1

	segmentMagic = "seqdseg\n"
	segmentExt   = ".seg"
	// segmentNameDigits: a segment is named by its ordinal, zero-padded.
	segmentNameDigits = 10
)

var (
	le       = binary.LittleEndian
	castagno = crc32.MakeTable(crc32.Castagnoli)
)

// segmentHeader is the decoded header of a segment file.
type segmentHeader struct {
	Session  uint64
	Ordinal  uint64
	FirstSeq uint64 // seq of the first record of the segment's first frame
	Created  int64  // wall clock, ns since the Unix epoch (informational)
	// Epoch, when not 0, is the epoch this segment begins at FirstSeq
	// (segFlagEpochStart): the records held from FirstSeq on in earlier
	// segments were cut by it, and its first frame, if any, starts there.
	Epoch uint32
}

// Errors of the format decoders; Open wraps them into a Corruption or Cut.
var (
	errShortHeader = errors.New("segment header shorter than 64 bytes")
	errMagic       = errors.New("not a seqd segment (bad magic)")
	errVersion     = errors.New("unknown segment format version")
	errHeaderCRC   = errors.New("segment header checksum mismatch")
	errHeaderField = errors.New("segment header field out of range")
	errShortFrame  = errors.New("frame runs past the end of the file")
	errFrameLen    = errors.New("frame length out of range")
	errFrameCRC    = errors.New("frame checksum mismatch")
	errFrameSeq    = errors.New("frame seq differs from its packet's")
)

// segmentName is the file name of segment ordinal.
func segmentName(ordinal uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, ordinal, segmentExt)
}

// parseSegmentName returns the ordinal of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != segmentNameDigits+len(segmentExt) || name[segmentNameDigits:] != segmentExt {
		return 0, false
	}
	var n uint64
	for _, c := range name[:segmentNameDigits] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n > 0
}

// putSegmentHeader writes h into b[:SegmentHeaderBytes].
func putSegmentHeader(b []byte, h *segmentHeader) {
	_ = b[SegmentHeaderBytes-1]
	copy(b, segmentMagic)
	le.PutUint16(b[8:], FormatVersion)
	le.PutUint16(b[10:], SegmentHeaderBytes)
	le.PutUint32(b[12:], 0)
	le.PutUint64(b[16:], h.Session)
	le.PutUint64(b[24:], h.Ordinal)
	le.PutUint64(b[32:], h.FirstSeq)
	le.PutUint64(b[40:], uint64(h.Created))
	clear(b[48:60])
	if h.Epoch != 0 {
		le.PutUint32(b[12:], segFlagEpochStart)
		le.PutUint32(b[48:], h.Epoch)
	}
	le.PutUint32(b[60:], crc32.Checksum(b[:60], castagno))
}

// decodeSegmentHeader validates b as a segment header.
func decodeSegmentHeader(b []byte, h *segmentHeader) error {
	if len(b) < SegmentHeaderBytes {
		return errShortHeader
	}
	if string(b[:8]) != segmentMagic {
		return errMagic
	}
	if crc32.Checksum(b[:60], castagno) != le.Uint32(b[60:]) {
		return errHeaderCRC
	}
	if le.Uint16(b[8:]) != FormatVersion {
		return errVersion
	}
	flags := le.Uint32(b[12:])
	if le.Uint16(b[10:]) != SegmentHeaderBytes || flags&^segFlagEpochStart != 0 {
		return errHeaderField
	}
	h.Epoch = 0
	reserved := b[48:60]
	if flags&segFlagEpochStart != 0 {
		if h.Epoch = le.Uint32(b[48:]); h.Epoch == 0 {
			return errHeaderField
		}
		reserved = b[52:60]
	}
	for _, c := range reserved {
		if c != 0 {
			return errHeaderField
		}
	}
	h.Session = le.Uint64(b[16:])
	h.Ordinal = le.Uint64(b[24:])
	h.FirstSeq = le.Uint64(b[32:])
	h.Created = int64(le.Uint64(b[40:]))
	if h.Session == 0 || h.Ordinal == 0 || h.FirstSeq == 0 {
		return errHeaderField
	}
	return nil
}

// putFrame writes the frame of pkt into b (len(b) >= FrameHeaderBytes +
// len(pkt)) and returns its length.
func putFrame(b []byte, pkt []byte, firstSeq uint64) int {
	n := FrameHeaderBytes + len(pkt)
	_ = b[n-1]
	le.PutUint32(b[4:], uint32(len(pkt)))
	le.PutUint64(b[8:], firstSeq)
	copy(b[FrameHeaderBytes:], pkt)
	le.PutUint32(b[0:], crc32.Checksum(b[4:n], castagno))
	return n
}

// frameLen peeks the length of the frame at b[0:] (header included), or
// fails when the length field is out of range for maxPacket; b holds at
// least FrameHeaderBytes.
func frameLen(b []byte, maxPacket int) (int, error) {
	n := le.Uint32(b[4:])
	if n < wire.PacketHeaderBytes || n > uint32(maxPacket) {
		return 0, errFrameLen
	}
	return FrameHeaderBytes + int(n), nil
}

// checkFrame verifies the checksum of the whole frame b (as long as
// frameLen said) and returns its packet. It does not decode the packet.
func checkFrame(b []byte) ([]byte, error) {
	if crc32.Checksum(b[4:], castagno) != le.Uint32(b) {
		return nil, errFrameCRC
	}
	return b[FrameHeaderBytes:], nil
}

// decodeFrame is the full check of one frame read from disk (untrusted
// bytes): it returns the frame's length, its packet (a view of b) and the
// packet decoded into p, or an error; it never panics and never reads
// outside b.
func decodeFrame(b []byte, maxPacket int, p *wire.Packet) (int, []byte, error) {
	if len(b) < FrameHeaderBytes {
		return 0, nil, errShortFrame
	}
	n, err := frameLen(b, maxPacket)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < n {
		return 0, nil, errShortFrame
	}
	pkt, err := checkFrame(b[:n])
	if err != nil {
		return 0, nil, err
	}
	if err := wire.DecodePacket(pkt, p); err != nil {
		return 0, nil, fmt.Errorf("frame packet: %w", err)
	}
	if p.Kind != wire.KindData || p.Count == 0 {
		return 0, nil, fmt.Errorf("frame packet: %w", ErrNotData)
	}
	if le.Uint64(b[8:]) != p.FirstSeq {
		return 0, nil, errFrameSeq
	}
	return n, pkt, nil
}

// packetInfo describes a packet that wire.DecodePacket accepted, from its
// header and first record, as the sequencer describes the packets it
// publishes (Fragment and FragFrom..FragTo only when the first record is a
// fragment). It reads the bytes directly so that Range decodes nothing.
func packetInfo(pkt []byte) sequencer.PacketInfo {
	info := sequencer.PacketInfo{
		FirstSeq: le.Uint64(pkt[24:]),
		Count:    int(le.Uint16(pkt[20:])),
	}
	hdr := int(le.Uint16(pkt[4:]))
	if hdr+wire.RecordHeaderBytes+wire.FragmentHeaderBytes <= len(pkt) && pkt[hdr+2]&wire.FlagFragment != 0 {
		info.Fragment = true
		info.FragFrom = le.Uint32(pkt[hdr+28:])
		info.FragTo = info.FragFrom + uint32(le.Uint16(pkt[hdr:]))
	}
	return info
}
