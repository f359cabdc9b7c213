package wire

// StatusBytes is the size of a status frame.
const StatusBytes = 56

// Status flags.
const (
	// StatusReadOnly marks a receiver that sends no commands (a tail, a
	// read-only node): flow control never waits for it.
	StatusReadOnly uint16 = 1 << 0
	// StatusReplayer marks a receiver that persists the stream (a replayer
	// or a standby sequencer).
	StatusReplayer uint16 = 1 << 1
	statusFlags           = StatusReadOnly | StatusReplayer
)

// Status is a receiver's periodic position report to the sequencer: the
// highest seq up to which it holds the stream with no gap. The sequencer
// derives each receiver's lag from it and bounds how far the stream runs
// ahead of the receivers that matter (flow control).
//
//	8 session u64, 16 epoch u32, 20 flags u16, 22 instance u8,
//	23 reserved u8, 24 account u64, 32 incarnation u64, 40 contiguous u64,
//	48 delivered u64
type Status struct {
	Session     uint64
	Epoch       uint32
	Flags       uint16
	Instance    uint8
	Account     Account // 0 for an anonymous receiver (a tail)
	Incarnation uint64  // tells two processes of one account/instance apart
	Contiguous  uint64  // every seq up to it is held whole
	Delivered   uint64  // every seq up to it was handed to the application
}

// AppendStatus encodes s into buf[:StatusBytes] and returns that slice.
func AppendStatus(buf []byte, s *Status) ([]byte, error) {
	if len(buf) < StatusBytes {
		return nil, ErrNoRoom
	}
	if s.Flags&^statusFlags != 0 || s.Delivered > s.Contiguous {
		return nil, ErrStatus
	}
	putPrefix(buf, KindStatus, StatusBytes)
	le.PutUint64(buf[8:], s.Session)
	le.PutUint32(buf[16:], s.Epoch)
	le.PutUint16(buf[20:], s.Flags)
	buf[22] = s.Instance
	buf[23] = 0
	le.PutUint64(buf[24:], uint64(s.Account))
	le.PutUint64(buf[32:], s.Incarnation)
	le.PutUint64(buf[40:], s.Contiguous)
	le.PutUint64(buf[48:], s.Delivered)
	return buf[:StatusBytes], nil
}

// DecodeStatus validates b as a status frame and fills s.
func DecodeStatus(b []byte, s *Status) error {
	hdr, err := checkPrefix(b, StatusBytes, KindStatus)
	if err != nil {
		return err
	}
	if len(b) != hdr {
		return ErrTrailing
	}
	if le.Uint16(b[6:]) != 0 || b[23] != 0 {
		return ErrFlags
	}
	s.Session = le.Uint64(b[8:])
	s.Epoch = le.Uint32(b[16:])
	s.Flags = le.Uint16(b[20:])
	s.Instance = b[22]
	s.Account = Account(le.Uint64(b[24:]))
	s.Incarnation = le.Uint64(b[32:])
	s.Contiguous = le.Uint64(b[40:])
	s.Delivered = le.Uint64(b[48:])
	if s.Flags&^statusFlags != 0 || s.Delivered > s.Contiguous {
		return ErrStatus
	}
	return nil
}
