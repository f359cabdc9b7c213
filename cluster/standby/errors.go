package standby

import "errors"

// Sentinel errors of the standby. Hot paths return them bare; the rest
// wrap them with the operation and the member.
var (
	// ErrConfig: a Config field out of range (the error names it).
	ErrConfig = errors.New("standby: bad config")
	// ErrSealed: Seal of an epoch older than one this standby sealed
	// already (a stale leader's seal).
	ErrSealed = errors.New("standby: sealed for a later epoch")
	// ErrTakenOver: the standby handed its state and store to a primary
	// (Takeover); it follows the stream no more.
	ErrTakenOver = errors.New("standby: taken over")
	// ErrBehindCut: Takeover at a cut the standby does not hold (CatchUp
	// first).
	ErrBehindCut = errors.New("standby: does not hold the cut")
	// ErrStashFull: more out-of-order stream bytes wait for the store than
	// Config.MaxStashBytes; the standby stops rather than lose them.
	ErrStashFull = errors.New("standby: stash full")
	// ErrCatchUp: no peer supplied what CatchUp lacks up to the cut.
	ErrCatchUp = errors.New("standby: catch-up incomplete")
)

// errTaken ends Run's loop after a Takeover (Run returns nil).
var errTaken = errors.New("standby: taken over (Run's loop ends)")
