package wire

// StatusBytes is the size of a status frame without the Member field
// (every receiver but a standby sequencer).
const StatusBytes = 56

// StatusStandbyBytes is the size of a standby's status frame: StatusBytes
// and the Member field (u64 @56), inside the header length, so a reader
// that predates it skips it.
const StatusStandbyBytes = 64

// Status flags.
const (
	// StatusReadOnly marks a receiver that sends no commands (a tail, a
	// read-only node): flow control never waits for it.
	StatusReadOnly uint16 = 1 << 0
	// StatusReplayer marks a receiver that persists the stream (a replayer
	// or a standby sequencer).
	StatusReplayer uint16 = 1 << 1
	// StatusStandby marks a standby sequencer's ack: Member names it and
	// Contiguous is the highest seq it holds (durably, as configured) with
	// no gap, for Epoch. The primary counts it toward its stable seq only
	// when Member is a voter of the current epoch and Epoch is that epoch.
	// The frame is StatusStandbyBytes long.
	StatusStandby uint16 = 1 << 2
	statusFlags          = StatusReadOnly | StatusReplayer | StatusStandby
)

// Status is a receiver's periodic position report to the sequencer: the
// highest seq up to which it holds the stream with no gap. The sequencer
// derives each receiver's lag from it and bounds how far the stream runs
// ahead of the receivers that matter (flow control).
//
//	8 session u64, 16 epoch u32, 20 flags u16, 22 instance u8,
//	23 reserved u8, 24 account u64, 32 incarnation u64, 40 contiguous u64,
//	48 delivered u64, and with StatusStandby: 56 member u64
type Status struct {
	Session     uint64
	Epoch       uint32
	Flags       uint16
	Instance    uint8
	Account     Account // 0 for an anonymous receiver (a tail)
	Incarnation uint64  // tells two processes of one account/instance apart
	Contiguous  uint64  // every seq up to it is held whole
	Delivered   uint64  // every seq up to it was handed to the application
	// Member is the cluster member id of a standby (StatusStandby set,
	// never 0); 0 otherwise.
	Member uint64
}

// AppendStatus encodes s into buf[:StatusBytes] (buf[:StatusStandbyBytes]
// with StatusStandby) and returns that slice.
func AppendStatus(buf []byte, s *Status) ([]byte, error) {
	n := StatusBytes
	if s.Flags&StatusStandby != 0 {
		n = StatusStandbyBytes
	}
	if len(buf) < n {
		return nil, ErrNoRoom
	}
	if s.Flags&^statusFlags != 0 || s.Delivered > s.Contiguous || (s.Member != 0) != (n == StatusStandbyBytes) {
		return nil, ErrStatus
	}
	putPrefix(buf, KindStatus, n)
	le.PutUint64(buf[8:], s.Session)
	le.PutUint32(buf[16:], s.Epoch)
	le.PutUint16(buf[20:], s.Flags)
	buf[22] = s.Instance
	buf[23] = 0
	le.PutUint64(buf[24:], uint64(s.Account))
	le.PutUint64(buf[32:], s.Incarnation)
	le.PutUint64(buf[40:], s.Contiguous)
	le.PutUint64(buf[48:], s.Delivered)
	if n == StatusStandbyBytes {
		le.PutUint64(buf[56:], s.Member)
	}
	return buf[:n], nil
}

// DecodeStatus validates b as a status frame and fills s. A standby's
// status (StatusStandby) must carry a non-zero Member; without the flag,
// header bytes past StatusBytes are skipped (fields of a later version).
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
	s.Member = 0
	if s.Flags&^statusFlags != 0 || s.Delivered > s.Contiguous {
		return ErrStatus
	}
	if s.Flags&StatusStandby != 0 {
		if hdr < StatusStandbyBytes {
			return ErrStatus
		}
		if s.Member = le.Uint64(b[56:]); s.Member == 0 {
			return ErrStatus
		}
	}
	return nil
}
