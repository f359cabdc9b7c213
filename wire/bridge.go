package wire

import "errors"

// ErrBridge is returned for a bridge frame that does not decode.
var ErrBridge = errors.New("wire: malformed bridge frame")

// Bridge frames are the datagrams of a bridge's UDP channels
// (docs/bridge.md): a 4-byte header, then the body of the kind.
//
//	0  uint16 BridgeMagic ("SB")
//	2  uint8  BridgeVersion
//	3  uint8  kind: BridgeData, BridgeHello or BridgeCommand
//	4  body:
//	   data:    a stored stream packet, byte for byte
//	   command: a command frame, byte for byte
//	   hello:   uint64 session, uint64 tip (highest seq held),
//	            uint8 n, n bytes of the origin site's name (1..MaxSiteBytes)
const (
	BridgeMagic       uint16 = 0x4253 // "SB"
	BridgeVersion     uint8  = 1
	BridgeHeaderBytes        = 4
	// MaxSiteBytes bounds a site's name.
	MaxSiteBytes = 32
	// BridgeHelloBytes is the largest hello.
	BridgeHelloBytes = BridgeHeaderBytes + 17 + MaxSiteBytes
)

// BridgeKind tells what a bridge frame carries.
type BridgeKind uint8

// Bridge frame kinds.
const (
	BridgeData    BridgeKind = 1 // sending end -> receiving end: a stream packet
	BridgeHello   BridgeKind = 2 // sending end -> receiving end: the origin's identity and the tip
	BridgeCommand BridgeKind = 3 // receiving end -> sending end: a command of the far site
)

// BridgeHelloFrame is a hello: which stream the channel carries. Origin
// is a fixed array so that decoding allocates nothing.
type BridgeHelloFrame struct {
	Session   uint64
	Tip       uint64
	Origin    [MaxSiteBytes]byte
	OriginLen uint8
}

// Site is the origin's name.
func (h *BridgeHelloFrame) Site() string { return string(h.Origin[:h.OriginLen]) }

// SetSite sets the origin's name; it fails when the name is empty or
// longer than MaxSiteBytes.
func (h *BridgeHelloFrame) SetSite(s string) error {
	if len(s) == 0 || len(s) > MaxSiteBytes {
		return ErrBridge
	}
	h.OriginLen = uint8(copy(h.Origin[:], s))
	return nil
}

func putBridgeHeader(buf []byte, k BridgeKind) {
	le.PutUint16(buf, BridgeMagic)
	buf[2] = BridgeVersion
	buf[3] = byte(k)
}

// AppendBridgeFrame writes a data or command frame holding body into
// buf[:0] (it needs BridgeHeaderBytes+len(body) bytes of capacity, or it
// fails with ErrNoRoom) and returns it. It allocates nothing.
func AppendBridgeFrame(buf []byte, k BridgeKind, body []byte) ([]byte, error) {
	n := BridgeHeaderBytes + len(body)
	if cap(buf) < n {
		return nil, ErrNoRoom
	}
	if k != BridgeData && k != BridgeCommand {
		return nil, ErrKind
	}
	buf = buf[:n]
	putBridgeHeader(buf, k)
	copy(buf[BridgeHeaderBytes:], body)
	return buf, nil
}

// AppendBridgeHello writes h into buf[:0] (capacity BridgeHelloBytes).
func AppendBridgeHello(buf []byte, h *BridgeHelloFrame) ([]byte, error) {
	if h.OriginLen == 0 || h.OriginLen > MaxSiteBytes {
		return nil, ErrBridge
	}
	n := BridgeHeaderBytes + 17 + int(h.OriginLen)
	if cap(buf) < n {
		return nil, ErrNoRoom
	}
	buf = buf[:n]
	putBridgeHeader(buf, BridgeHello)
	le.PutUint64(buf[4:], h.Session)
	le.PutUint64(buf[12:], h.Tip)
	buf[20] = h.OriginLen
	copy(buf[21:], h.Origin[:h.OriginLen])
	return buf, nil
}

// DecodeBridge checks b's header and returns its kind and body (a view
// of b). A data body is checked as a stream packet, a command body as a
// command frame, by their own decoders, by the caller.
func DecodeBridge(b []byte) (BridgeKind, []byte, error) {
	if len(b) < BridgeHeaderBytes {
		return 0, nil, ErrShort
	}
	if le.Uint16(b) != BridgeMagic {
		return 0, nil, ErrMagic
	}
	if b[2] != BridgeVersion {
		return 0, nil, ErrVersion
	}
	k := BridgeKind(b[3])
	if k < BridgeData || k > BridgeCommand {
		return 0, nil, ErrKind
	}
	return k, b[BridgeHeaderBytes:], nil
}

// DecodeBridgeHello decodes the body of a hello into h.
func DecodeBridgeHello(body []byte, h *BridgeHelloFrame) error {
	if len(body) < 17 {
		return ErrShort
	}
	n := int(body[16])
	if n == 0 || n > MaxSiteBytes || len(body) != 17+n {
		return ErrBridge
	}
	h.Session = le.Uint64(body)
	h.Tip = le.Uint64(body[8:])
	h.OriginLen = uint8(n)
	copy(h.Origin[:], body[17:])
	return nil
}

// PeekPacketSeqs reads, without decoding the records, the epoch, first
// seq and record count of a stream data packet that is at least a header
// long; false for anything else. A bridge's merge drops most copies by
// it alone (their records lie below what it delivered).
func PeekPacketSeqs(b []byte) (epoch uint32, first uint64, count int, ok bool) {
	if len(b) < PacketHeaderBytes || le.Uint16(b) != Magic || b[2] != Version || Kind(b[3]) != KindData {
		return 0, 0, 0, false
	}
	return le.Uint32(b[offPktEpoch:]), le.Uint64(b[offPktFirstSeq:]), int(le.Uint16(b[offPktCount:])), true
}

// On a bridge's TCP channel, beside the rewind connections, a receiving
// end keeps a control connection to the same address (docs/bridge.md):
// it carries the hellos one way and the far site's commands the other,
// so that a link with no UDP channel has both. Its bytes are records:
//
//	0  uint16 BridgeMagic ("SB"; a rewind request starts "SQ")
//	2  uint8  BridgeVersion
//	3  uint8  kind: BridgeHello or BridgeCommand
//	4  uint32 body length (at most MaxBridgeRecordBody)
//	8  body, as in a datagram of that kind
const (
	BridgeRecordHeaderBytes = 8
	// MaxBridgeRecordBody bounds a record's body: the largest command
	// frame a datagram can carry.
	MaxBridgeRecordBody = 65536
)

// AppendBridgeRecord appends a record of kind k (hello or command)
// holding body to buf.
func AppendBridgeRecord(buf []byte, k BridgeKind, body []byte) ([]byte, error) {
	if k != BridgeHello && k != BridgeCommand {
		return buf, ErrKind
	}
	if len(body) > MaxBridgeRecordBody {
		return buf, ErrBridge
	}
	var h [BridgeRecordHeaderBytes]byte
	putBridgeHeader(h[:], k)
	le.PutUint32(h[4:], uint32(len(body)))
	return append(append(buf, h[:]...), body...), nil
}

// DecodeBridgeRecordHeader checks a record's header (the first
// BridgeRecordHeaderBytes of b) and returns its kind and body length.
func DecodeBridgeRecordHeader(b []byte) (BridgeKind, int, error) {
	if len(b) < BridgeRecordHeaderBytes {
		return 0, 0, ErrShort
	}
	k, _, err := DecodeBridge(b[:BridgeHeaderBytes])
	if err != nil {
		return 0, 0, err
	}
	if k != BridgeHello && k != BridgeCommand {
		return 0, 0, ErrKind
	}
	n := le.Uint32(b[4:])
	if n > MaxBridgeRecordBody {
		return 0, 0, ErrBridge
	}
	return k, int(n), nil
}
