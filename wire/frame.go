package wire

import "encoding/binary"

// Magic is the first two bytes of every seqd frame ("SQ" when read as
// little-endian bytes 0x53 0x51).
const Magic uint16 = 0x5153

// Version is the protocol version this package speaks.
const Version uint8 = 1

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
	}
	return "unknown"
}

const prefixBytes = 4

var le = binary.LittleEndian

// PeekKind validates the 4-byte prefix of a frame and returns its kind.
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
	if k < KindData || k > KindGone {
		return 0, ErrKind
	}
	return k, nil
}

func putPrefix(b []byte, k Kind) {
	le.PutUint16(b, Magic)
	b[2] = Version
	b[3] = byte(k)
}

func checkPrefix(b []byte, min int, want Kind) error {
	k, err := PeekKind(b)
	if err != nil {
		return err
	}
	if k != want {
		return ErrKind
	}
	if len(b) < min {
		return ErrShort
	}
	return nil
}
