package ops

import "errors"

// Sentinel errors of the admin API. The admin endpoint answers each with
// its own HTTP status, and the client turns that status back into the
// sentinel (errors.Is works across the wire); cluster's errors of the
// same names are these.
var (
	// ErrNotPrimary: the request needs the primary (the Raft leader), and
	// the member asked is not it; the error names the leader when known.
	ErrNotPrimary = errors.New("ops: not primary")
	// ErrUnknownMember: a transfer or removal names no member.
	ErrUnknownMember = errors.New("ops: unknown member")
	// ErrTooFewVoters: a removal would leave fewer than three voters
	// (add the replacement first).
	ErrTooFewVoters = errors.New("ops: too few voters")
)
