package fsm

import "errors"

// Decoding errors: the bytes are not a command or a snapshot this version
// understands. A log entry that fails to decode is rejected like an invalid
// command (Apply returns the error); a snapshot that fails to decode fails
// Restore and leaves the state as it was.
var (
	ErrMalformed        = errors.New("fsm: malformed encoding")
	ErrUnknownVersion   = errors.New("fsm: unknown encoding version")
	ErrUnknownCommand   = errors.New("fsm: unknown command type")
	ErrChecksum         = errors.New("fsm: snapshot checksum mismatch")
	ErrSnapshotTooLarge = errors.New("fsm: snapshot too large")
	ErrInvalidState     = errors.New("fsm: snapshot state violates an invariant")
	ErrNotCommand       = errors.New("fsm: raft log entry is not a command")
)

// Rejections: a well-formed command that is not valid in the current state.
// Apply returns them (wrapped with the details) as the raft response, so
// the proposer learns why; every member rejects the same command the same
// way, and a rejected command leaves the state unchanged.
var (
	ErrStaleSession        = errors.New("fsm: new session: previous session id is not the current one")
	ErrNoSession           = errors.New("fsm: no session started")
	ErrSessionNotAfter     = errors.New("fsm: new session: id is not above the current one")
	ErrEpochNotNext        = errors.New("fsm: begin epoch: epoch is not current+1")
	ErrPrimaryNotVoter     = errors.New("fsm: begin epoch: primary is not a voting member")
	ErrCutBeforeEpochStart = errors.New("fsm: begin epoch: cut is below the previous epoch's start-1")
	ErrCutBelowCheckpoint  = errors.New("fsm: begin epoch: cut is below a recorded checkpoint")
	ErrCutWithoutPrimary   = errors.New("fsm: begin epoch: the previous epoch had no primary, so its cut must be its start-1")
	ErrSeqOverflow         = errors.New("fsm: sequence number overflow")
	ErrStaleEpoch          = errors.New("fsm: checkpoint: epoch is not the current one")
	ErrNoEpoch             = errors.New("fsm: checkpoint: no epoch with a primary")
	ErrCheckpointNotAfter  = errors.New("fsm: checkpoint: seq is not above the latest checkpoint")
	ErrCheckpointBeforeCut = errors.New("fsm: checkpoint: seq is below the current epoch's start-1")
	ErrClockBackwards      = errors.New("fsm: checkpoint: time is before the latest checkpoint's")
	ErrBadMember           = errors.New("fsm: add member: invalid member")
	ErrMemberExists        = errors.New("fsm: add member: id already a member")
	ErrAddressInUse        = errors.New("fsm: add member: raft address already used by another member")
	ErrTooManyMembers      = errors.New("fsm: add member: member table full")
	ErrUnknownMember       = errors.New("fsm: unknown member")
	ErrRemovePrimary       = errors.New("fsm: remove member: member is the current primary")
	ErrDemotePrimary       = errors.New("fsm: set role: the current primary must stay a voter")
	ErrSealNotCurrent      = errors.New("fsm: seal epoch: epoch is not the current one")
	ErrDropNotSealed       = errors.New("fsm: drop checkpoints: the epoch is not sealed")
)
