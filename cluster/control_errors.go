package cluster

import (
	"errors"

	"github.com/seqd/seqd/ops"
)

// Sentinel errors of the control path (raft wiring, roles, admin). The
// data path (standby, quorum, fetch) keeps its own beside it.
var (
	// ErrConfig is wrapped by the Validate methods with the bad field and its range.
	ErrConfig = errors.New("cluster: invalid config")
	// ErrNotPrimary: the request needs the primary (the Raft leader), and
	// this member is not it; the error names the leader when known. It is
	// the admin API's (the endpoint answers it with its own status).
	ErrNotPrimary = ops.ErrNotPrimary
	// ErrNoQuorum: fewer than a quorum of voters answered the seal of the
	// epoch before the deadline, so no cut is known and no epoch begins.
	ErrNoQuorum = errors.New("cluster: seal: no quorum answered")
	// ErrSealRefused: a member refused to seal (it is sealed for a later
	// epoch already, or it failed).
	ErrSealRefused = errors.New("cluster: seal refused")
	// ErrUnknownMember: a transfer or removal names no member (the admin
	// API's).
	ErrUnknownMember = ops.ErrUnknownMember
	// ErrTooFewVoters: a removal would leave fewer than three voters
	// (add the replacement first; the admin API's).
	ErrTooFewVoters = ops.ErrTooFewVoters
	// ErrNotCaughtUp: a member added as a nonvoter has not caught up in
	// time to be promoted (add it again once it has).
	ErrNotCaughtUp = errors.New("cluster: the new member has not caught up")
	// ErrStopped: the node was shut down.
	ErrStopped = errors.New("cluster: node stopped")
	// ErrTransfer: a planned handover did not complete (no new epoch
	// committed in time).
	ErrTransfer = errors.New("cluster: transfer of the primary role failed")
)
