package node

import "errors"

// Sentinel errors. Fatal ones (ErrUnrecoverable, ErrDiverged) are wrapped
// with detail and become sticky in Core.Err; test them with errors.Is.
var (
	ErrWindowFull    = errors.New("node: send window full")
	ErrReadOnly      = errors.New("node: read-only node cannot send")
	ErrTooLarge      = errors.New("node: payload larger than MaxMessageBytes")
	ErrUnrecoverable = errors.New("node: unrecoverable gap")
	ErrDiverged      = errors.New("node: diverged: a new epoch cut messages this node already delivered")
	ErrFrameKind     = errors.New("node: frame kind not expected by a node")
	ErrNewSession    = errors.New("node: a newer session is on the stream")
	ErrConfig        = errors.New("node: invalid config")
	ErrClosed        = errors.New("node: closed")
)
