package logger

import "errors"

var (
	// ErrConfig: a Config field is out of range; the error names it.
	ErrConfig = errors.New("logger: bad config")
	// ErrClosed: a message arrived after Close.
	ErrClosed = errors.New("logger: closed")
)
