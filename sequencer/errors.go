package sequencer

import "errors"

// Sentinel errors. Step also returns the wire package's decoder sentinels
// (wire.ErrShort, wire.ErrRecord, wire.ErrTimerReq, ...) for malformed frames.
var (
	// ErrConfig is wrapped by Config.Validate with the bad field and its range.
	ErrConfig = errors.New("sequencer: invalid config")
	// ErrTooManySenders: a frame came from a new (account, instance) while
	// the dedupe table already holds MaxSenders entries.
	ErrTooManySenders = errors.New("sequencer: sender table full")
	// ErrFragmentedTimer: a CmdTimer command arrived as fragments; timer
	// requests are 32 bytes and always travel whole.
	ErrFragmentedTimer = errors.New("sequencer: timer request must not be fragmented")
	// ErrCommandTooLarge: a command (or a fragment's Total) exceeds
	// Config.MaxMessageBytes.
	ErrCommandTooLarge = errors.New("sequencer: command larger than MaxMessageBytes")
)
