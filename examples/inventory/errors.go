package inventory

import "errors"

// Sentinel errors. Decoders return them bare (hot path); the shells wrap
// them with the operation and the id.
var (
	ErrConfig    = errors.New("inventory: invalid configuration")
	ErrMalformed = errors.New("inventory: malformed payload")
	ErrNotTxn    = errors.New("inventory: not a transaction")
	ErrNotReply  = errors.New("inventory: not a reply")
	ErrTooMany   = errors.New("inventory: too many updates in one transaction")
	ErrKey       = errors.New("inventory: key empty or longer than MaxKeyBytes")
	ErrTimeout   = errors.New("inventory: no answer from the stream in time")
	ErrStore     = errors.New("inventory: store")
	ErrDiverged  = errors.New("inventory: instances diverged")
)
