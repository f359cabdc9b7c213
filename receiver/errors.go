package receiver

import "errors"

// Sentinel errors. The fatal ones are wrapped with detail (the range, the
// epochs, the sessions) and become sticky in Receiver.Err; test them with
// errors.Is.
var (
	ErrUnrecoverable = errors.New("receiver: unrecoverable gap")
	ErrDiverged      = errors.New("receiver: diverged: a new epoch cut messages this receiver already delivered")
	ErrNewSession    = errors.New("receiver: another session is live on the stream")
	ErrTooLarge      = errors.New("receiver: message larger than MaxReceiveMessageBytes")
	// ErrEpochBelowStable: a new epoch starts at or below the stable seq
	// this receiver believes. Step returns it for each such packet (it
	// is dropped; Err stays nil); once that epoch alone has been live
	// for SessionTimeout, it becomes the fatal error, wrapped with the
	// epoch, its start and the stable.
	ErrEpochBelowStable = errors.New("receiver: a new epoch starts at or below the stable seq this receiver believes")
	// ErrEpochJump: a header of an epoch more than MaxEpochJump beyond
	// the current one, while the current one publishes: no Raft group
	// could have made it, so it is dropped (Step returns it; Err stays
	// nil).
	ErrEpochJump = errors.New("receiver: an epoch far beyond the current one while the current one publishes")
	// ErrOtherSession: a packet of another session while the one followed
	// publishes: dropped (Step returns it; Err stays nil). The shell logs
	// it rate-limited.
	ErrOtherSession = errors.New("receiver: packet of another session while the one followed publishes")
	ErrFrameKind    = errors.New("receiver: frame kind not expected by a receiver")
	ErrConfig       = errors.New("receiver: invalid config")
	// ErrNotStarted: StepRewind before a live packet started the
	// receiver; the caller keeps the packet and tries again later.
	ErrNotStarted = errors.New("receiver: rewind packet before the live stream started the receiver")
)
