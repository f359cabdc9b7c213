package demo

import "errors"

// ErrConfig is wrapped by every Config error (a config.Error naming the
// field).
var ErrConfig = errors.New("demo: invalid configuration")
