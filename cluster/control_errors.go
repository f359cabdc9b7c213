package cluster

import "errors"

// Sentinel errors of the control path (raft wiring, roles, admin). The
// data path (standby, quorum, fetch) keeps its own beside it.
var (
	// ErrConfig is wrapped by the Validate methods with the bad field and its range.
	ErrConfig = errors.New("cluster: invalid config")
	// ErrNotPrimary: the request needs the primary (the Raft leader), and
	// this member is not it; the error names the leader when known.
	ErrNotPrimary = errors.New("cluster: not primary")
	// ErrNoQuorum: fewer than a quorum of voters answered the seal of the
	// epoch before the deadline, so no cut is known and no epoch begins.
	ErrNoQuorum = errors.New("cluster: seal: no quorum answered")
	// ErrSealRefused: a member refused to seal (it is sealed for a later
	// epoch already, or it failed).
	ErrSealRefused = errors.New("cluster: seal refused")
	// ErrUnknownMember: a transfer or removal names no member.
	ErrUnknownMember = errors.New("cluster: unknown member")
	// ErrTooFewVoters: a removal would leave fewer than three voters
	// (add the replacement first).
	ErrTooFewVoters = errors.New("cluster: too few voters")
	// ErrStopped: the node was shut down.
	ErrStopped = errors.New("cluster: node stopped")
	// ErrTransfer: a planned handover did not complete (no new epoch
	// committed in time).
	ErrTransfer = errors.New("cluster: transfer of the primary role failed")
)
