package bridge

import "errors"

var (
	// ErrConfig: a Config field is out of range (the message names it).
	ErrConfig = errors.New("bridge: invalid config")
	// ErrLoop: the stream's origin is this receiving end's own site; a
	// bridge never carries a stream back toward its origin.
	ErrLoop = errors.New("bridge: stream would go back to its origin")
	// ErrSession: two channels carry different sessions.
	ErrSession = errors.New("bridge: channels carry different sessions")
)
