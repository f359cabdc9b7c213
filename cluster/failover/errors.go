package failover

import "errors"

// Sentinel errors. An attempt that fails reports one (wrapped with the
// epoch and the counts) in Ready.Failed; the shell logs it once.
var (
	// ErrConfig: a Config field is out of range (Validate names it).
	ErrConfig = errors.New("failover: invalid config")
	// ErrNoVoters: the failover state names no voting member.
	ErrNoVoters = errors.New("failover: no voters in the failover state")
	// ErrNoQuorum: the seal timed out, or every voter answered, before
	// enough answers counted to intersect every majority of the voters.
	ErrNoQuorum = errors.New("failover: no quorum answered the seal")
	// ErrFutureEpoch: a seal of an epoch the failover state has not
	// reached (a forged or confused request); the member refuses it and
	// keeps acking (issue 14 item 6).
	ErrFutureEpoch = errors.New("failover: seal of an epoch the failover state has not reached")
	// ErrBehindCut: the catch-up ended below the cut.
	ErrBehindCut = errors.New("failover: catch-up ended below the cut")
	// ErrCommit: the committed state is not the epoch this member
	// proposed (another proposal won, or the state was stale).
	ErrCommit = errors.New("failover: the committed state is not the proposed epoch")
	// ErrEpochOverflow: the next epoch does not fit the stream's 32 bits.
	ErrEpochOverflow = errors.New("failover: epoch overflows 32 bits")
)
