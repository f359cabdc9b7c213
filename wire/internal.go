package wire

// InternalBytes is the fixed size of an internal message payload.
const InternalBytes = 40

// InternalType tells what an internal (sequencer-generated) message means.
type InternalType uint8

// Internal message types.
const (
	InternalSessionStart    InternalType = 1 // a session begins; Value = start time (ns)
	InternalEpochStart      InternalType = 2 // Epoch begins at this record's seq (Value); Extra = the epoch of the record before it (0: none or unknown)
	InternalNodeActivated   InternalType = 3 // Account/Instance is now the active instance
	InternalNodeDeactivated InternalType = 4 // Account/Instance is no longer active
	InternalForcePassive    InternalType = 5 // operator asks Account/Instance to go passive
	InternalTimer           InternalType = 6 // centralized timer ID of Account/Instance fired; Value = scheduled time
	InternalIncarnation     InternalType = 7 // Account/Instance restarted as incarnation Value; its cmdSeq restarts at 1
	InternalTimerSet        InternalType = 8 // Account/Instance scheduled timer ID at Value, every Extra ns if > 0
	InternalTimerCancel     InternalType = 9 // Account/Instance cancelled timer ID
	// InternalRejected: the sequencer refused command ID (cmdSeq) of
	// Account/Instance, incarnation Extra, for reason Value (a
	// RejectReason). The command seq is used up: the sender's later
	// commands are not held behind it, and its node reports the error.
	InternalRejected InternalType = 10
	// InternalSenderForgotten: the sequencer's sender table was full and
	// it forgot Account/Instance (incarnation Extra, last cmdSeq ID), the
	// least recently active sender, to make room for a new one. Its
	// dedupe entry and centralized timers are gone: its next command must
	// start a new incarnation at cmdSeq 1 (a command above 1 is dropped as
	// out of order, since a resend can no longer be told from a new one).
	InternalSenderForgotten InternalType = 11
	// InternalStaleIncarnation: the sequencer dropped command frames of
	// Account/Instance sent as incarnation Extra, older than Value, the
	// one on record (a restart whose wall-clock incarnation went back,
	// joining live so it never saw Value announced). That node must take
	// an incarnation above Value and send again. It changes no state.
	InternalStaleIncarnation InternalType = 12
	// InternalActivate: an operator (or a node, through a control
	// command named by the record's account, instance and cmdSeq) asks
	// Account/Instance to become the active instance of its hot-hot
	// account. The switch itself is the NodeDeactivated/NodeActivated
	// pair that follows.
	InternalActivate InternalType = 13
	internalLast                  = InternalActivate
)

func (t InternalType) String() string {
	switch t {
	case InternalSessionStart:
		return "session-start"
	case InternalEpochStart:
		return "epoch-start"
	case InternalNodeActivated:
		return "node-activated"
	case InternalNodeDeactivated:
		return "node-deactivated"
	case InternalForcePassive:
		return "force-passive"
	case InternalTimer:
		return "timer"
	case InternalIncarnation:
		return "incarnation"
	case InternalTimerSet:
		return "timer-set"
	case InternalTimerCancel:
		return "timer-cancel"
	case InternalRejected:
		return "rejected"
	case InternalSenderForgotten:
		return "sender-forgotten"
	case InternalStaleIncarnation:
		return "stale-incarnation"
	case InternalActivate:
		return "activate"
	}
	return "unknown"
}

// RejectReason says why the sequencer refused a command (the Value of an
// InternalRejected record).
type RejectReason uint64

// Reasons for InternalRejected.
const (
	RejectTooLarge        RejectReason = 1 // payload above the sequencer's max message bytes
	RejectSenderTableFull RejectReason = 2 // too many live senders; an unknown one is refused
	RejectReassemblyFull  RejectReason = 3 // the reassembly budget for fragmented commands is spent
	RejectTimerCap        RejectReason = 4 // the sender has as many centralized timers as allowed
	RejectTimerRequest    RejectReason = 5 // a malformed timer request, or a period below the minimum
	RejectFragmentedTimer RejectReason = 6 // a timer request split into fragments
	// RejectTimerRate: the sender's periodic timers would fire more often
	// than the sequencer allows one sender (max-timer-fires-per-second).
	RejectTimerRate RejectReason = 7
	// RejectNotActive: a command of a hot-hot account from an instance
	// that is not its active one (fencing: a paused active resumed, or a
	// passive that sent).
	RejectNotActive RejectReason = 8
	// RejectDuplicateID: a hot-hot command whose id was already sequenced
	// for its account (the partner's copy is in the stream).
	RejectDuplicateID RejectReason = 9
	// RejectControl: a malformed control request, one naming an unknown
	// instance, or a force-passive with no live partner to take over.
	RejectControl RejectReason = 10
)

func (r RejectReason) String() string {
	switch r {
	case RejectTooLarge:
		return "command larger than the sequencer's max-message-bytes"
	case RejectSenderTableFull:
		return "sequencer's sender table is full"
	case RejectReassemblyFull:
		return "sequencer's reassembly budget is full"
	case RejectTimerCap:
		return "too many centralized timers for this sender"
	case RejectTimerRequest:
		return "malformed timer request or period below the minimum"
	case RejectFragmentedTimer:
		return "fragmented timer request"
	case RejectTimerRate:
		return "this sender's timers would fire more often than the sequencer's max-timer-fires-per-second"
	case RejectNotActive:
		return "this instance is not the active instance of its hot-hot account"
	case RejectDuplicateID:
		return "a command with this id was already sequenced for the hot-hot account"
	case RejectControl:
		return "control request refused (malformed, unknown instance, or no live partner to take over)"
	}
	return "unknown reason"
}

// Internal is the payload of a record with FlagInternal. One fixed layout
// serves every type; fields a type does not use are zero.
//
//	0 type u8, 1 instance u8, 2 reserved u16, 4 epoch u32,
//	8 account u64, 16 id u64, 24 value u64, 32 extra i64
type Internal struct {
	Type     InternalType
	Instance uint8
	Epoch    uint32
	Account  Account
	ID       uint64
	Value    uint64
	Extra    int64
}

// AppendInternal encodes m into buf[:InternalBytes] and returns that slice.
func AppendInternal(buf []byte, m *Internal) ([]byte, error) {
	if len(buf) < InternalBytes {
		return nil, ErrNoRoom
	}
	buf[0] = byte(m.Type)
	buf[1] = m.Instance
	le.PutUint16(buf[2:], 0)
	le.PutUint32(buf[4:], m.Epoch)
	le.PutUint64(buf[8:], uint64(m.Account))
	le.PutUint64(buf[16:], m.ID)
	le.PutUint64(buf[24:], m.Value)
	le.PutUint64(buf[32:], uint64(m.Extra))
	return buf[:InternalBytes], nil
}

// DecodeInternal validates b as an internal message payload and fills m.
// Bytes after InternalBytes are fields added later and are skipped.
func DecodeInternal(b []byte, m *Internal) error {
	if len(b) < InternalBytes {
		return ErrInternal
	}
	t := InternalType(b[0])
	if t < InternalSessionStart || t > internalLast || le.Uint16(b[2:]) != 0 {
		return ErrInternal
	}
	m.Type = t
	m.Instance = b[1]
	m.Epoch = le.Uint32(b[4:])
	m.Account = Account(le.Uint64(b[8:]))
	m.ID = le.Uint64(b[16:])
	m.Value = le.Uint64(b[24:])
	m.Extra = int64(le.Uint64(b[32:]))
	return nil
}

// TimerRequestBytes is the fixed size of a TimerRequest payload.
const TimerRequestBytes = 32

// TimerRequest is the payload of a command with CmdTimer: schedule (or
// cancel) centralized timer ID to fire at sequencer time At, then every
// Period ns if Period > 0.
//
//	0 id u64, 8 at i64, 16 period i64, 24 cancel u8, 25 reserved [7]u8
type TimerRequest struct {
	ID     uint64
	At     int64
	Period int64
	Cancel bool
}

// AppendTimerRequest encodes t into buf[:TimerRequestBytes].
func AppendTimerRequest(buf []byte, t *TimerRequest) ([]byte, error) {
	if len(buf) < TimerRequestBytes {
		return nil, ErrNoRoom
	}
	if t.Period < 0 {
		return nil, ErrTimerReq
	}
	le.PutUint64(buf[0:], t.ID)
	le.PutUint64(buf[8:], uint64(t.At))
	le.PutUint64(buf[16:], uint64(t.Period))
	for i := 24; i < 32; i++ {
		buf[i] = 0
	}
	if t.Cancel {
		buf[24] = 1
	}
	return buf[:TimerRequestBytes], nil
}

// DecodeTimerRequest validates b as a timer request and fills t.
func DecodeTimerRequest(b []byte, t *TimerRequest) error {
	if len(b) != TimerRequestBytes || b[24] > 1 {
		return ErrTimerReq
	}
	for i := 25; i < 32; i++ {
		if b[i] != 0 {
			return ErrTimerReq
		}
	}
	t.ID = le.Uint64(b[0:])
	t.At = int64(le.Uint64(b[8:]))
	t.Period = int64(le.Uint64(b[16:]))
	t.Cancel = b[24] == 1
	if t.Period < 0 {
		return ErrTimerReq
	}
	return nil
}

// ControlBytes is the fixed size of a ControlRequest payload.
const ControlBytes = 16

// Control operations.
const (
	ControlActivate     uint8 = 1 // make Account/Instance the active instance
	ControlForcePassive uint8 = 2 // make Account/Instance passive (its live partner takes over)
)

// ControlRequest is the payload of a command with CmdControl: an
// activation change of a hot-hot account, asked by a node.
//
//	0 op u8, 1 instance u8, 2 reserved [6]u8, 8 account u64
type ControlRequest struct {
	Op       uint8
	Instance uint8
	Account  Account
}

// AppendControl encodes r into buf[:ControlBytes].
func AppendControl(buf []byte, r *ControlRequest) ([]byte, error) {
	if len(buf) < ControlBytes {
		return nil, ErrNoRoom
	}
	if r.Op != ControlActivate && r.Op != ControlForcePassive {
		return nil, ErrControl
	}
	buf[0], buf[1] = r.Op, r.Instance
	for i := 2; i < 8; i++ {
		buf[i] = 0
	}
	le.PutUint64(buf[8:], uint64(r.Account))
	return buf[:ControlBytes], nil
}

// DecodeControl validates b as a control request and fills r.
func DecodeControl(b []byte, r *ControlRequest) error {
	if len(b) != ControlBytes || (b[0] != ControlActivate && b[0] != ControlForcePassive) {
		return ErrControl
	}
	for i := 2; i < 8; i++ {
		if b[i] != 0 {
			return ErrControl
		}
	}
	r.Op, r.Instance, r.Account = b[0], b[1], Account(le.Uint64(b[8:]))
	if r.Account == 0 {
		return ErrControl
	}
	return nil
}
