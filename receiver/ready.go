package receiver

import "github.com/seqd/seqd/wire"

// Message is one message to deliver, whole and in order. Payload is a view
// of the frame passed to Step, or of the receiver's ring: valid until
// Advance (and, for a view of the frame, while the frame is).
//
// Fields are ordered so that a Message fills one 64-byte cache line.
type Message struct {
	Seq      uint64
	Time     int64 // sequencer time (ns) at which it was sequenced
	Account  wire.Account
	CmdSeq   uint64
	Payload  []byte
	Epoch    uint32 // derived from Seq's position in the stream
	Instance uint8
	Flags    uint8 // wire record flags, FlagFragment cleared
}

// Frame is one frame to send: Bytes to the source To. Bytes is valid until
// Advance.
type Frame struct {
	To    Source
	Bytes []byte
}

// Ready is what the shell must do after Step or Tick, in this order:
//
//  1. Persist: write these stream frames (replayers, standbys) before
//     anything depending on them leaves the process;
//  2. Send: hand these frames (NAKs, status) to the transport;
//  3. Deliver: hand these messages to the application, in order.
//
// Then call Advance. Step and Tick append to the same Ready until Advance,
// so a shell may batch several steps; but Payloads that view a frame are
// valid only while that frame is, so a shell whose transport reuses the
// frame buffer handles Ready before the next frame.
type Ready struct {
	Persist [][]byte
	Send    []Frame
	Deliver []Message
}

// Empty reports whether there is nothing to do.
func (r *Ready) Empty() bool {
	return len(r.Persist) == 0 && len(r.Send) == 0 && len(r.Deliver) == 0
}

// Stats are a Receiver's counters since New.
type Stats struct {
	Delivered      uint64 // messages put into Ready.Deliver
	Duplicates     uint64 // records dropped because already held or delivered
	Gaps           uint64 // gaps detected (each NAKed until repaired)
	GapSeqs        uint64 // seqs found missing: how far a packet or stable jumped past the tail (GapSeqs/Gaps: the mean gap size)
	NaksSent       uint64
	Malformed      uint64 // frames or records rejected
	Fenced         uint64 // packets or records dropped: another session, an epoch they do not belong to
	Overflow       uint64 // records dropped because beyond the receive ring
	DroppedByEpoch uint64 // buffered records discarded because a new epoch cut them
	WildStable     uint64 // headers whose stable ran too far beyond what was published (ignored)
	BadEpoch       uint64 // headers with an epoch start that contradicts what is known (dropped)
	// EpochBelowStable: headers of a newer epoch starting at or below the
	// stable believed (dropped, ErrEpochBelowStable; also in BadEpoch).
	EpochBelowStable uint64
	// EpochJumpHeld: headers of an epoch beyond the current one +
	// MaxEpochJump not (yet) followed (ErrEpochJump).
	EpochJumpHeld uint64
	// EpochReverted: times the receiver went back to an older epoch that
	// kept publishing while the newer one, in which it delivered nothing,
	// was silent for SessionTimeout (a forged or abandoned epoch).
	EpochReverted  uint64
	GoneIgnored    uint64 // Gone frames not from the source asked, another epoch, or a range not asked
	SourceSwitches uint64 // NAKs moved to another repair source (a Gone, or a source timeout)
	SourceTimeouts uint64 // repair sources left after RepairSourceTimeout without an answer
	OtherSession   uint64 // packets of another session not (yet) followed
	SessionSwitch  uint64 // times a receiver that delivered nothing followed a live session
	// StartedOver: a live-tail joiner that had delivered nothing started
	// over on a newer epoch that cut where it had started (its first
	// packet was a deposed primary's, delayed or replayed).
	StartedOver uint64
	BudgetDrops uint64 // records dropped because the reassembly budget was full
	AheadDrops  uint64 // fragments dropped because far beyond the bytes held of their message
	StatusSent  uint64
	Rewound     uint64 // packets taken from a rewind (StepRewind)
	HeldPackets uint64 // packets held whole until stable covered them (safe mode, hold.go)
}
