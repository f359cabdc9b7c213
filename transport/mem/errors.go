package mem

import "errors"

var (
	// ErrConfig is wrapped by Config.Validate errors.
	ErrConfig = errors.New("mem: bad config")
	// ErrUnknownPeer is returned by SendTo for a Peer no client of this
	// network has.
	ErrUnknownPeer = errors.New("mem: unknown peer")
)
