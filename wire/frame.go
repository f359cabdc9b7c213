package wire

import "encoding/binary"

// Magic is the first two bytes of every seqd frame ("SQ" when read as
// little-endian bytes 0x53 0x51).
const Magic uint16 = 0x5153

// Version is the protocol version this package speaks. A frame of another
// version is refused whole (ErrVersion): versions change only for layouts
// an older reader would misread. Additions an older reader may skip go
// after the fixed header, inside the header length (see HeaderLen).
const Version uint8 = 2

// MaxMessageBytes bounds the total size of one (reassembled) message or
// command payload. Receivers refuse fragments that claim more, so a
// malicious or corrupt header cannot make them reserve unbounded memory.
const MaxMessageBytes = 1 << 30

// DefaultMaxPacketBytes is the default UDP payload size (1500-byte Ethernet
// MTU minus IPv4 and UDP headers).
const DefaultMaxPacketBytes = 1472

// Kind tells what a frame is.
type Kind uint8

// Frame kinds.
const (
	KindData      Kind = 1 // sequenced messages, first send or retransmit
	KindHeartbeat Kind = 2 // no records; tells the tail and stable when idle
	KindCommand   Kind = 3 // node -> sequencer
	KindNak       Kind = 4 // receiver -> sequencer/replayer: resend a range
	KindGone      Kind = 5 // answer to a NAK that cannot be repaired
	KindStatus    Kind = 6 // receiver -> sequencer: position report (flow control, lag)
	kindLast           = KindStatus
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindHeartbeat:
		return "heartbeat"
	case KindCommand:
		return "command"
	case KindNak:
		return "nak"
	case KindGone:
		return "gone"
	case KindStatus:
		return "status"
	}
	return "unknown"
}

// prefixBytes is the common prefix of every frame: magic, version, kind,
// header length and flags.
const prefixBytes = 8

var le = binary.LittleEndian

// PeekKind validates the 8-byte prefix of a frame and returns its kind.
func PeekKind(b []byte) (Kind, error) {
	if len(b) < prefixBytes {
		return 0, ErrShort
	}
	if le.Uint16(b) != Magic {
		return 0, ErrMagic
	}
	if b[2] != Version {
		return 0, ErrVersion
	}
	k := Kind(b[3])
	if k < KindData || k > kindLast {
		return 0, ErrKind
	}
	return k, nil
}

// HeaderLen is the header length an encoded frame declares: where its body
// (records) starts. A reader skips header bytes past the fixed layout it
// knows; they hold fields added later.
func HeaderLen(b []byte) int { return int(le.Uint16(b[4:])) }

// putPrefix writes the common prefix of a frame of kind k whose header is
// hdr bytes long, with no flags.
func putPrefix(b []byte, k Kind, hdr int) {
	le.PutUint16(b, Magic)
	b[2] = Version
	b[3] = byte(k)
	le.PutUint16(b[4:], uint16(hdr))
	le.PutUint16(b[6:], 0)
}

// checkPrefix validates the prefix of a frame of kind want whose fixed
// header is min bytes and returns the header length it declares, which
// may exceed min (fields added later) but not the frame.
func checkPrefix(b []byte, min int, want Kind) (int, error) {
	k, err := PeekKind(b)
	if err != nil {
		return 0, err
	}
	if k != want {
		return 0, ErrKind
	}
	if len(b) < min {
		return 0, ErrShort
	}
	h := HeaderLen(b)
	if h < min || h > len(b) {
		return 0, ErrHeader
	}
	return h, nil
}

// skipRecord checks the record at the start of body (stream or command:
// a header of h bytes that says n payload bytes, then, for a fragment, the
// fragment header with the message's total and this fragment's offset)
// and returns what follows it. Decoders validate every record with it so
// that Next never has to fail.
func skipRecord(body []byte, h, n int, fragment bool) ([]byte, error) {
	if fragment {
		if len(body) < h+FragmentHeaderBytes {
			return nil, ErrRecord
		}
		total, off := le.Uint32(body[h:]), le.Uint32(body[h+4:])
		if total > MaxMessageBytes {
			return nil, ErrTooLarge
		}
		if uint64(off)+uint64(n) > uint64(total) {
			return nil, ErrFragment
		}
		h += FragmentHeaderBytes
	}
	if len(body) < h+n {
		return nil, ErrRecord
	}
	return body[h+n:], nil
}
