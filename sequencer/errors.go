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
	// ErrUnknownInstance: an activation change names an account instance
	// the sequencer has no record of (it never sent nor heartbeated).
	ErrUnknownInstance = errors.New("sequencer: no such account instance on record")
	// ErrNotActive: force-passive of an instance that is not active.
	ErrNotActive = errors.New("sequencer: the instance is not the active one")
	// ErrNoPartner: force-passive with no other instance heard within
	// ActiveTimeout to take over (the account would have no active one).
	ErrNoPartner = errors.New("sequencer: no live partner instance to take over")
)
