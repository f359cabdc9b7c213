package wire

import (
	"errors"
	"hash/crc32"
)

// The rewind protocol (docs/protocol.md, "Rewind"): over one TCP
// connection a client sends a RewindRequest, the replayer answers with a
// RewindReply and then, if it accepted, a stream of rewind frames: the
// stored stream packets from the seq asked for, byte for byte as the
// replayer's store holds them (the segment frame layout of
// replayer/doc.go), until the client closes the connection or the
// replayer ends the stream with an end frame.
//
// Request, RewindRequestBytes (32):
//
//	 0 magic    [4]byte "SQRW"
//	 4 version  u8   RewindVersion (1)
//	 5 kind     u8   1 (request)
//	 6 hdrLen   u16  32
//	 8 session  u64  the session wanted; 0: the one the replayer holds
//	16 fromSeq  u64  first seq wanted (>= 1)
//	24 flags    u32  RewindFollow: keep streaming as the store grows
//	28 reserved u32  0
//
// Reply, RewindReplyBytes (40):
//
//	 0 magic    [4]byte "SQRW"
//	 4 version  u8   RewindVersion
//	 5 kind     u8   2 (reply)
//	 6 hdrLen   u16  40
//	 8 status   u16  RewindOK, or why not (the connection is closed then)
//	10 reserved u16  0
//	12 reserved u32  0
//	16 session  u64  the session held (0: none yet)
//	24 oldest   u64  the oldest seq held (0: none yet)
//	32 newest   u64  the highest seq held whole when answering
//
// Stream frame, RewindFrameHeaderBytes (16) plus the packet:
//
//	 0 crc      u32  CRC-32C (Castagnoli) of bytes 4 .. 16+length
//	 4 length   u32  packet bytes, PacketHeaderBytes .. 1 MiB
//	 8 firstSeq u64  the packet's first seq
//	16 packet   [length]byte  a data packet of this version
//
// An end frame has length 0 and crc 0; its firstSeq field holds the
// reason (RewindEnd*) in its top 8 bits and the next seq not sent in the
// low 56 bits.
const (
	RewindRequestBytes     = 32
	RewindReplyBytes       = 40
	RewindFrameHeaderBytes = 16
	// RewindVersion is the rewind protocol version; another is refused.
	RewindVersion = 1
	// RewindMaxPacketBytes bounds the packet of one rewind frame.
	RewindMaxPacketBytes = 1 << 20

	rewindMagic       = "SQRW"
	rewindKindRequest = 1
	rewindKindReply   = 2
)

// RewindFollow asks the replayer to keep streaming past the highest seq
// it holds, as its store grows, until the client closes.
const RewindFollow uint32 = 1 << 0

// Reply statuses.
const (
	RewindOK          uint16 = 0
	RewindBadSession  uint16 = 1 // the replayer holds another session
	RewindGone        uint16 = 2 // fromSeq lies below the oldest seq held
	RewindBadRequest  uint16 = 3 // the request did not decode
	RewindUnavailable uint16 = 4 // the store cannot serve (corrupt, closing, too many rewinds)
)

// End reasons (end frames).
const (
	RewindEndTip     uint8 = 1 // without RewindFollow: everything held was sent
	RewindEndClosed  uint8 = 2 // the replayer is shutting down
	RewindEndCorrupt uint8 = 3 // the store holds a corrupt frame at the next seq
	RewindEndError   uint8 = 4 // the store could not be read
)

// Rewind decoding errors.
var (
	ErrRewind      = errors.New("wire: malformed rewind frame")
	ErrRewindCRC   = errors.New("wire: rewind frame checksum mismatch")
	ErrRewindLimit = errors.New("wire: rewind frame larger than allowed")
)

// RewindRequest asks a replayer for the stream from FromSeq on.
type RewindRequest struct {
	Session uint64
	FromSeq uint64
	Flags   uint32
}

// RewindReply is a replayer's answer to a RewindRequest.
type RewindReply struct {
	Status  uint16
	Session uint64
	Oldest  uint64
	Newest  uint64
}

// AppendRewindRequest appends the encoded request to buf.
func AppendRewindRequest(buf []byte, q *RewindRequest) []byte {
	var b [RewindRequestBytes]byte
	putRewindPrefix(b[:], rewindKindRequest, RewindRequestBytes)
	le.PutUint64(b[8:], q.Session)
	le.PutUint64(b[16:], q.FromSeq)
	le.PutUint32(b[24:], q.Flags)
	return append(buf, b[:]...)
}

// DecodeRewindRequest decodes b (RewindRequestBytes long) into q.
func DecodeRewindRequest(b []byte, q *RewindRequest) error {
	if err := checkRewindPrefix(b, rewindKindRequest, RewindRequestBytes); err != nil {
		return err
	}
	*q = RewindRequest{Session: le.Uint64(b[8:]), FromSeq: le.Uint64(b[16:]), Flags: le.Uint32(b[24:])}
	if q.FromSeq == 0 {
		return ErrZeroSeq
	}
	if q.Flags&^RewindFollow != 0 || le.Uint32(b[28:]) != 0 {
		return ErrFlags
	}
	return nil
}

// AppendRewindReply appends the encoded reply to buf.
func AppendRewindReply(buf []byte, r *RewindReply) []byte {
	var b [RewindReplyBytes]byte
	putRewindPrefix(b[:], rewindKindReply, RewindReplyBytes)
	le.PutUint16(b[8:], r.Status)
	le.PutUint64(b[16:], r.Session)
	le.PutUint64(b[24:], r.Oldest)
	le.PutUint64(b[32:], r.Newest)
	return append(buf, b[:]...)
}

// DecodeRewindReply decodes b (RewindReplyBytes long) into r.
func DecodeRewindReply(b []byte, r *RewindReply) error {
	if err := checkRewindPrefix(b, rewindKindReply, RewindReplyBytes); err != nil {
		return err
	}
	if le.Uint16(b[10:]) != 0 || le.Uint32(b[12:]) != 0 {
		return ErrFlags
	}
	*r = RewindReply{Status: le.Uint16(b[8:]), Session: le.Uint64(b[16:]), Oldest: le.Uint64(b[24:]), Newest: le.Uint64(b[32:])}
	return nil
}

func putRewindPrefix(b []byte, kind uint8, n int) {
	copy(b, rewindMagic)
	b[4] = RewindVersion
	b[5] = kind
	le.PutUint16(b[6:], uint16(n))
}

func checkRewindPrefix(b []byte, kind uint8, n int) error {
	switch {
	case len(b) < n:
		return ErrShort
	case string(b[:4]) != rewindMagic:
		return ErrMagic
	case b[4] != RewindVersion:
		return ErrVersion
	case b[5] != kind:
		return ErrKind
	case int(le.Uint16(b[6:])) != n:
		return ErrHeader
	}
	return nil
}

var rewindCRC = crc32.MakeTable(crc32.Castagnoli)

// RewindFrameLen peeks the whole length of the frame starting at b
// (header included), given at least RewindFrameHeaderBytes: what a
// reader must hold before DecodeRewindFrame. An end frame is
// RewindFrameHeaderBytes long. maxPacket (<= RewindMaxPacketBytes) is
// the largest packet the reader accepts.
func RewindFrameLen(b []byte, maxPacket int) (int, error) {
	if len(b) < RewindFrameHeaderBytes {
		return 0, ErrShort
	}
	n := le.Uint32(b[4:])
	switch {
	case n == 0:
		return RewindFrameHeaderBytes, nil
	case n < PacketHeaderBytes:
		return 0, ErrRewind
	case n > uint32(maxPacket) || n > RewindMaxPacketBytes:
		return 0, ErrRewindLimit
	}
	return RewindFrameHeaderBytes + int(n), nil
}

// DecodeRewindFrame checks the whole frame b (as long as RewindFrameLen
// said) and returns its packet (a view of b), or, for an end frame, a nil
// packet with the reason and the next seq not sent. It checks the CRC and
// that the firstSeq field matches the packet's; the packet itself is
// decoded by the caller (wire.DecodePacket, or a receiver's Step).
func DecodeRewindFrame(b []byte) (pkt []byte, reason uint8, next uint64, err error) {
	if len(b) < RewindFrameHeaderBytes {
		return nil, 0, 0, ErrShort
	}
	n := le.Uint32(b[4:])
	if n == 0 {
		if le.Uint32(b) != 0 || len(b) != RewindFrameHeaderBytes {
			return nil, 0, 0, ErrRewind
		}
		v := le.Uint64(b[8:])
		return nil, uint8(v >> 56), v & (1<<56 - 1), nil
	}
	if int(n) != len(b)-RewindFrameHeaderBytes || n < PacketHeaderBytes {
		return nil, 0, 0, ErrRewind
	}
	if crc32.Checksum(b[4:], rewindCRC) != le.Uint32(b) {
		return nil, 0, 0, ErrRewindCRC
	}
	pkt = b[RewindFrameHeaderBytes:]
	if le.Uint64(b[8:]) != le.Uint64(pkt[offPktFirstSeq:]) {
		return nil, 0, 0, ErrRewind
	}
	return pkt, 0, 0, nil
}

// AppendRewindEnd appends an end frame.
func AppendRewindEnd(buf []byte, reason uint8, next uint64) []byte {
	var b [RewindFrameHeaderBytes]byte
	le.PutUint64(b[8:], uint64(reason)<<56|next&(1<<56-1))
	return append(buf, b[:]...)
}

// AppendRewindFrame appends the frame of pkt (tests and servers that do
// not hold stored frames).
func AppendRewindFrame(buf []byte, pkt []byte) []byte {
	at := len(buf)
	buf = append(buf, make([]byte, RewindFrameHeaderBytes)...)
	buf = append(buf, pkt...)
	b := buf[at:]
	le.PutUint32(b[4:], uint32(len(pkt)))
	if len(pkt) >= PacketHeaderBytes {
		le.PutUint64(b[8:], le.Uint64(pkt[offPktFirstSeq:]))
	}
	le.PutUint32(b, crc32.Checksum(b[4:], rewindCRC))
	return buf
}
