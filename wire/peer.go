package wire

// The peer protocol: what the members of a sequencer group ask each other
// on their peer port (fsm.Member.StreamAddr; `seqd sequencer --peer-addr`),
// apart from Raft's own RPCs. The admin endpoint is for people; members
// never use it. One TCP connection per request, client first:
//
//   - fetch: a new primary (or a standby catching up) asks for the stored
//     stream packets of from..to it lacks;
//   - seal: a new primary seals the current epoch on a voter, which stops
//     acking it and reports what it holds;
//   - status: a member that handed the primary role over asks the new
//     primary when its epoch's first record went out (the pause).
//
// Request, PeerRequestBytes (32):
//
//	 0 magic    [4]byte "SQPR"
//	 4 version  u8   1 or PeerVersion (2): the version of the answer the
//	                 client reads (a version 1 seal gets the 24-byte answer)
//	 5 kind     u8   PeerFetch, PeerSeal or PeerStatus
//	 6 hdrLen   u16  32
//	 8 from     u64  fetch: first seq wanted (>= 1); otherwise 0
//	16 to       u64  fetch: last seq wanted (>= from); otherwise 0
//	24 epoch    u32  seal: the epoch to seal (>= 1); otherwise 0
//	28 reserved u32  0
//
// Answer: frames, each PeerFrameHeaderBytes (8) then length bytes:
//
//	0 kind     u8
//	1 reserved [3]byte  0
//	4 length   u32
//
// of kinds:
//
//	PeerPacket (1)  one stream packet as stored (1 .. PeerMaxPacketBytes):
//	                a fetch's packets, in stream order, gap-free
//	PeerEnd (2)     PeerEndBytes (8): held u64, the highest seq the
//	                server holds whole; the last frame of a whole fetch
//	PeerError (3)   the server's error text (at most PeerMaxErrorBytes);
//	                the last frame of any answer
//	PeerSealed (4)  the answer to a seal: member u64 @0, contiguous u64 @8,
//	                heldEpoch u32 @16, reserved u32 @20 (0); to a version 2
//	                request also lastStamp i64 @24, the newest sequencer
//	                time the member saw (heartbeats included; 0: none):
//	                PeerSealReplyBytes (32), or PeerSealReplyV1Bytes (24)
//	                to a version 1 request
//	PeerState (5)   the answer to a status: member u64 @0, epoch u64 @8,
//	                startedAt i64 @16 (wall ns of the epoch's first record,
//	                0: none), role u8 @24, reserved [7]byte @25 (0); to a
//	                version 2 request also contiguous u64 @32, the highest
//	                seq its store holds with no gap (what a checkpoint may
//	                count): PeerStatusReplyBytes (40), or
//	                PeerStatusReplyV1Bytes (32) to a version 1 request
//
// All integers are little-endian. A frame header declaring more than its
// kind may hold is refused before its body is read, so a peer cannot make
// the reader reserve more. Encoders and decoders allocate nothing.
const (
	PeerRequestBytes       = 32
	PeerFrameHeaderBytes   = 8
	PeerEndBytes           = 8
	PeerSealReplyBytes     = 32
	PeerSealReplyV1Bytes   = 24
	PeerStatusReplyBytes   = 40
	PeerStatusReplyV1Bytes = 32
	// PeerVersion is the peer protocol's version: requests of it or of
	// PeerMinVersion are served, others refused.
	PeerVersion    = 2
	PeerMinVersion = 1
	// PeerMaxPacketBytes bounds the packet of one PeerPacket frame (the
	// largest packet a store frame holds).
	PeerMaxPacketBytes = 1 << 20
	// PeerMaxErrorBytes bounds the text of a PeerError frame.
	PeerMaxErrorBytes = 1024

	peerMagic = "SQPR"
)

// Request kinds.
const (
	PeerFetch  uint8 = 1
	PeerSeal   uint8 = 2
	PeerStatus uint8 = 3
)

// Answer frame kinds.
const (
	PeerPacket uint8 = 1
	PeerEnd    uint8 = 2
	PeerError  uint8 = 3
	PeerSealed uint8 = 4
	PeerState  uint8 = 5
)

// PeerRequest is one request of the peer protocol.
type PeerRequest struct {
	// Version is the request's (and its answer's) version: 0 encodes as
	// PeerVersion; DecodePeerRequest sets it.
	Version  uint8
	Kind     uint8
	From, To uint64 // PeerFetch
	Epoch    uint32 // PeerSeal
}

// PeerSealReply is a member's answer to a seal.
type PeerSealReply struct {
	Member     uint64
	Contiguous uint64 // the highest contiguous seq it holds
	// HeldEpoch is the epoch of the newest record Contiguous counts (0:
	// none, or a member that cannot tell).
	HeldEpoch uint32
	// LastStamp is the newest sequencer time the member saw, records and
	// heartbeats (0: none, or a version 1 answer): the new epoch's clock
	// floor counts the old primary's last heartbeat any member saw.
	LastStamp int64
}

// PeerStatusReply is a member's answer to a status request.
type PeerStatusReply struct {
	Member    uint64
	Epoch     uint64 // the epoch of its failover state
	StartedAt int64  // wall ns of the first record of its current or last epoch as primary
	Role      uint8  // the member's role (cluster.Role)
	// Contiguous is the highest seq its store holds with no gap (0 in a
	// version 1 answer): the primary records a checkpoint only at or below
	// what a quorum holds by these answers, not by the stream's acks.
	Contiguous uint64
}

// AppendPeerRequest appends the encoded request to buf. It does not check
// q: DecodePeerRequest refuses what is not valid.
func AppendPeerRequest(buf []byte, q *PeerRequest) []byte {
	var b [PeerRequestBytes]byte
	copy(b[:], peerMagic)
	b[4] = q.Version
	if b[4] == 0 {
		b[4] = PeerVersion
	}
	b[5] = q.Kind
	le.PutUint16(b[6:], PeerRequestBytes)
	le.PutUint64(b[8:], q.From)
	le.PutUint64(b[16:], q.To)
	le.PutUint32(b[24:], q.Epoch)
	return append(buf, b[:]...)
}

// DecodePeerRequest decodes b (exactly PeerRequestBytes) into q and checks
// it: a known kind, a valid range for a fetch (ErrPeerRange), an epoch for
// a seal, zeros in the fields its kind does not use.
func DecodePeerRequest(b []byte, q *PeerRequest) error {
	switch {
	case len(b) < PeerRequestBytes:
		return ErrShort
	case len(b) > PeerRequestBytes:
		return ErrPeer
	case string(b[:4]) != peerMagic:
		return ErrMagic
	case b[4] < PeerMinVersion || b[4] > PeerVersion:
		return ErrVersion
	case le.Uint16(b[6:]) != PeerRequestBytes:
		return ErrHeader
	case le.Uint32(b[28:]) != 0:
		return ErrPeer
	}
	*q = PeerRequest{Version: b[4], Kind: b[5], From: le.Uint64(b[8:]), To: le.Uint64(b[16:]), Epoch: le.Uint32(b[24:])}
	switch q.Kind {
	case PeerFetch:
		if q.Epoch != 0 {
			return ErrPeer
		}
		if q.From == 0 || q.To < q.From {
			return ErrPeerRange
		}
	case PeerSeal:
		if q.From != 0 || q.To != 0 || q.Epoch == 0 {
			return ErrPeer
		}
	case PeerStatus:
		if q.From != 0 || q.To != 0 || q.Epoch != 0 {
			return ErrPeer
		}
	default:
		return ErrKind
	}
	return nil
}

// PutPeerFrameHeader writes the header of a frame of kind with n body
// bytes into b (at least PeerFrameHeaderBytes).
func PutPeerFrameHeader(b []byte, kind uint8, n int) {
	_ = b[PeerFrameHeaderBytes-1]
	b[0], b[1], b[2], b[3] = kind, 0, 0, 0
	le.PutUint32(b[4:], uint32(n))
}

// DecodePeerFrameHeader checks an answer frame's header (exactly
// PeerFrameHeaderBytes) and returns its kind and body length, which is
// within what the kind may hold.
func DecodePeerFrameHeader(b []byte) (kind uint8, n int, err error) {
	if len(b) != PeerFrameHeaderBytes {
		return 0, 0, ErrShort
	}
	if b[1]|b[2]|b[3] != 0 {
		return 0, 0, ErrPeer
	}
	kind, n64 := b[0], le.Uint32(b[4:])
	var ok bool
	switch kind {
	case PeerPacket:
		ok = n64 != 0 && n64 <= PeerMaxPacketBytes
	case PeerEnd:
		ok = n64 == PeerEndBytes
	case PeerError:
		ok = n64 <= PeerMaxErrorBytes
	case PeerSealed:
		ok = n64 == PeerSealReplyBytes || n64 == PeerSealReplyV1Bytes
	case PeerState:
		ok = n64 == PeerStatusReplyBytes || n64 == PeerStatusReplyV1Bytes
	default:
		return 0, 0, ErrKind
	}
	if !ok {
		return 0, 0, ErrPeer
	}
	return kind, int(n64), nil
}

// AppendPeerPacket appends a PeerPacket frame of pkt.
func AppendPeerPacket(buf, pkt []byte) []byte {
	var h [PeerFrameHeaderBytes]byte
	PutPeerFrameHeader(h[:], PeerPacket, len(pkt))
	return append(append(buf, h[:]...), pkt...)
}

// AppendPeerEnd appends a PeerEnd frame: the server holds up to held.
func AppendPeerEnd(buf []byte, held uint64) []byte {
	var b [PeerFrameHeaderBytes + PeerEndBytes]byte
	PutPeerFrameHeader(b[:], PeerEnd, PeerEndBytes)
	le.PutUint64(b[PeerFrameHeaderBytes:], held)
	return append(buf, b[:]...)
}

// DecodePeerEnd returns the held seq of a PeerEnd frame's body.
func DecodePeerEnd(body []byte) (held uint64, err error) {
	if len(body) != PeerEndBytes {
		return 0, ErrPeer
	}
	return le.Uint64(body), nil
}

// AppendPeerError appends a PeerError frame of msg, cut to
// PeerMaxErrorBytes.
func AppendPeerError(buf []byte, msg string) []byte {
	if len(msg) > PeerMaxErrorBytes {
		msg = msg[:PeerMaxErrorBytes]
	}
	var h [PeerFrameHeaderBytes]byte
	PutPeerFrameHeader(h[:], PeerError, len(msg))
	return append(append(buf, h[:]...), msg...)
}

// AppendPeerSealReply appends a PeerSealed frame of r, of version
// PeerVersion (PeerSealReplyBytes).
func AppendPeerSealReply(buf []byte, r *PeerSealReply) []byte {
	return AppendPeerSealReplyVersion(buf, r, PeerVersion)
}

// AppendPeerSealReplyVersion appends a PeerSealed frame of r for a request
// of version v: a version 1 client reads PeerSealReplyV1Bytes, without
// LastStamp.
func AppendPeerSealReplyVersion(buf []byte, r *PeerSealReply, v uint8) []byte {
	var b [PeerFrameHeaderBytes + PeerSealReplyBytes]byte
	n := PeerSealReplyBytes
	if v < 2 {
		n = PeerSealReplyV1Bytes
	}
	PutPeerFrameHeader(b[:], PeerSealed, n)
	p := b[PeerFrameHeaderBytes:]
	le.PutUint64(p[0:], r.Member)
	le.PutUint64(p[8:], r.Contiguous)
	le.PutUint32(p[16:], r.HeldEpoch)
	if n == PeerSealReplyBytes {
		le.PutUint64(p[24:], uint64(r.LastStamp))
	}
	return append(buf, b[:PeerFrameHeaderBytes+n]...)
}

// DecodePeerSealReply decodes a PeerSealed frame's body (of either
// version) into r.
func DecodePeerSealReply(body []byte, r *PeerSealReply) error {
	if len(body) != PeerSealReplyBytes && len(body) != PeerSealReplyV1Bytes {
		return ErrPeer
	}
	*r = PeerSealReply{Member: le.Uint64(body[0:]), Contiguous: le.Uint64(body[8:]), HeldEpoch: le.Uint32(body[16:])}
	if len(body) == PeerSealReplyBytes {
		r.LastStamp = int64(le.Uint64(body[24:]))
	}
	if r.Member == 0 {
		return ErrPeer
	}
	if le.Uint32(body[20:]) != 0 {
		// Once the PeerHoldsOwn flag, never sent (a primary now counts
		// only what it wrote): reserved.
		return ErrFlags
	}
	if r.LastStamp < 0 {
		return ErrPeer
	}
	return nil
}

// AppendPeerStatusReply appends a PeerState frame of r, of version
// PeerVersion (PeerStatusReplyBytes).
func AppendPeerStatusReply(buf []byte, r *PeerStatusReply) []byte {
	return AppendPeerStatusReplyVersion(buf, r, PeerVersion)
}

// AppendPeerStatusReplyVersion appends a PeerState frame of r for a
// request of version v: a version 1 client reads PeerStatusReplyV1Bytes,
// without Contiguous.
func AppendPeerStatusReplyVersion(buf []byte, r *PeerStatusReply, v uint8) []byte {
	var b [PeerFrameHeaderBytes + PeerStatusReplyBytes]byte
	n := PeerStatusReplyBytes
	if v < 2 {
		n = PeerStatusReplyV1Bytes
	}
	PutPeerFrameHeader(b[:], PeerState, n)
	p := b[PeerFrameHeaderBytes:]
	le.PutUint64(p[0:], r.Member)
	le.PutUint64(p[8:], r.Epoch)
	le.PutUint64(p[16:], uint64(r.StartedAt))
	p[24] = r.Role
	if n == PeerStatusReplyBytes {
		le.PutUint64(p[32:], r.Contiguous)
	}
	return append(buf, b[:PeerFrameHeaderBytes+n]...)
}

// DecodePeerStatusReply decodes a PeerState frame's body (of either
// version) into r.
func DecodePeerStatusReply(body []byte, r *PeerStatusReply) error {
	if len(body) != PeerStatusReplyBytes && len(body) != PeerStatusReplyV1Bytes {
		return ErrPeer
	}
	for _, c := range body[25:32] {
		if c != 0 {
			return ErrPeer
		}
	}
	*r = PeerStatusReply{Member: le.Uint64(body[0:]), Epoch: le.Uint64(body[8:]), StartedAt: int64(le.Uint64(body[16:])), Role: body[24]}
	if len(body) == PeerStatusReplyBytes {
		r.Contiguous = le.Uint64(body[32:])
	}
	if r.Member == 0 {
		return ErrPeer
	}
	return nil
}
