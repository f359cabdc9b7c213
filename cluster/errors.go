package cluster

import "errors"

// Sentinel errors of the data path (quorum, standby, fetch); the control
// path's are in control_errors.go. Hot paths return them bare; the rest
// wrap them with the operation and the id.
var (
	// ErrTooManyVoters: a membership has more voters than MaxVoters.
	ErrTooManyVoters = errors.New("cluster: too many voters")
	// ErrSealed: Seal of an epoch older than one this standby sealed
	// already (a stale leader's seal).
	ErrSealed = errors.New("cluster: sealed for a later epoch")
	// ErrTakenOver: the standby handed its state and store to a primary
	// (Takeover); it follows the stream no more.
	ErrTakenOver = errors.New("cluster: standby taken over")
	// ErrBehindCut: Takeover at a cut the standby does not hold (CatchUp
	// first).
	ErrBehindCut = errors.New("cluster: standby does not hold the cut")
	// ErrStashFull: more out-of-order stream bytes wait for the store than
	// StandbyConfig.MaxStashBytes; the standby stops rather than lose them.
	ErrStashFull = errors.New("cluster: standby stash full")
	// ErrCatchUp: no peer supplied what CatchUp lacks up to the cut.
	ErrCatchUp = errors.New("cluster: catch-up incomplete")
	// ErrFetchRange: a fetch of an empty or reversed range, or from seq 0.
	ErrFetchRange = errors.New("cluster: bad fetch range")
	// ErrFetchRefused: the peer server answered a fetch with an error.
	// (Malformed peer frames are wire's errors: wire.ErrPeer and its kin.)
	ErrFetchRefused = errors.New("cluster: fetch refused")
	// ErrPartitioned: a PartitionLayer refused a Raft dial while a drill
	// has the member cut off.
	ErrPartitioned = errors.New("cluster: partitioned by fault injection")
)
