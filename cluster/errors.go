package cluster

import "errors"

// Sentinel errors of the data path (quorum, standby, fetch). Hot paths
// return them bare; the rest wrap them with the operation and the id.
var (
	// ErrTooManyVoters: a membership has more voters than MaxVoters.
	ErrTooManyVoters = errors.New("cluster: too many voters")
)
