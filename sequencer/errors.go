package sequencer

import "errors"

// Sentinel errors. Step also returns the wire package's decoder sentinels
// (wire.ErrShort, wire.ErrRecord, ...) for malformed frames. Commands the
// sequencer cannot take are not errors of Step: they are rejected in the
// stream (wire.InternalRejected) and counted in Stats.
var (
	// ErrConfig is wrapped by Config.Validate with the bad field and its range.
	ErrConfig = errors.New("sequencer: invalid config")
	// ErrApplyGap: State.Apply got a record whose seq is not the next one.
	ErrApplyGap = errors.New("sequencer: record applied out of seq order")
	// ErrApplyRecord: State.Apply got an internal record that does not
	// decode (or is fragmented).
	ErrApplyRecord = errors.New("sequencer: malformed internal record")
	// ErrApplyFull: State.Apply got a record naming a new sender while
	// the table is full (the primary emits InternalSenderForgotten first).
	ErrApplyFull = errors.New("sequencer: record names a new sender in a full table")
	// ErrSnapshot: State.Restore got bytes that are not a valid snapshot
	// of a version it reads.
	ErrSnapshot = errors.New("sequencer: malformed state snapshot")
	// ErrTakeover: NewPrimary got a State that is not at the new epoch's
	// cut, or that was built for another MaxSenders.
	ErrTakeover = errors.New("sequencer: cannot take over")
)
