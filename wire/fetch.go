package wire

import "errors"

// The frames of a fetch answer (a member's catch-up from another member's
// store, cluster.Fetch): each an 8-byte header, kind u8 @0, reserved
// [3]byte (0), length u32 @4 (little-endian), then length bytes. The
// request and the conversation are the cluster's; the frames are here
// because a standby writes them (FetchRange) and reads them (CatchUpFrom)
// as the fetch server and client do.
const (
	// FetchFrameHeaderBytes is the size of a fetch answer frame's header.
	FetchFrameHeaderBytes = 8
	// FetchPacket: one stream packet, as stored.
	FetchPacket byte = 1
	// FetchEnd: 8 bytes, the highest seq the server holds whole; the last
	// frame of a complete answer.
	FetchEnd byte = 2
	// FetchError: the server's error text (at most MaxFetchErrorBytes),
	// the last frame.
	FetchError byte = 3
	// MaxFetchErrorBytes bounds a FetchError frame's text.
	MaxFetchErrorBytes = 1024
)

// ErrFetchFrame: a fetch answer frame header is malformed.
var ErrFetchFrame = errors.New("wire: malformed fetch frame")

// PutFetchFrame writes a fetch answer frame header of kind for n bytes
// into b (at least FetchFrameHeaderBytes long).
func PutFetchFrame(b []byte, kind byte, n int) {
	b[0], b[1], b[2], b[3] = kind, 0, 0, 0
	le.PutUint32(b[4:], uint32(n))
}

// DecodeFetchFrame validates a fetch answer frame header and returns its
// kind and body length; a packet frame longer than maxPacketBytes is
// refused before its body is read, so a peer cannot make the reader
// reserve more.
func DecodeFetchFrame(b []byte, maxPacketBytes int) (kind byte, n int, err error) {
	if len(b) != FetchFrameHeaderBytes {
		return 0, 0, ErrFetchFrame
	}
	kind, n64 := b[0], le.Uint32(b[4:])
	if b[1]|b[2]|b[3] != 0 {
		return 0, 0, ErrFetchFrame
	}
	switch kind {
	case FetchPacket:
		if n64 == 0 || int64(n64) > int64(maxPacketBytes) {
			return 0, 0, ErrFetchFrame
		}
	case FetchEnd:
		if n64 != 8 {
			return 0, 0, ErrFetchFrame
		}
	case FetchError:
		if n64 > MaxFetchErrorBytes {
			return 0, 0, ErrFetchFrame
		}
	default:
		return 0, 0, ErrFetchFrame
	}
	return kind, int(n64), nil
}
