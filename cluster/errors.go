package cluster

import "errors"

// Sentinel errors of the data path (quorum, fetch); the control path's
// are in control_errors.go, the standby's in standby_errors.go. Hot
// paths return them bare; the rest wrap them with the operation and the
// id.
var (
	// ErrTooManyVoters: a membership has more voters than MaxVoters.
	ErrTooManyVoters = errors.New("cluster: too many voters")
	// ErrFetchRange: a fetch of an empty or reversed range, or from seq 0.
	ErrFetchRange = errors.New("cluster: bad fetch range")
	// ErrFetchRefused: the peer server answered a fetch with an error.
	// (Malformed peer frames are wire's errors: wire.ErrPeer and its kin.)
	ErrFetchRefused = errors.New("cluster: fetch refused")
	// ErrPartitioned: a PartitionLayer refused a Raft dial while a drill
	// has the member cut off.
	ErrPartitioned = errors.New("cluster: partitioned by fault injection")
	// ErrIdentity: the member's IdentityFile cannot be read, parsed or
	// written.
	ErrIdentity = errors.New("cluster: member identity file")
	// ErrIdentityID: the directory is another member's (IdentityFile).
	ErrIdentityID = errors.New("cluster: directory of another member")
	// ErrIdentityPeers: the member bootstrapped with another peer set
	// than it is given now (IdentityFile).
	ErrIdentityPeers = errors.New("cluster: peers differ from the ones this member bootstrapped with")
)
