package agent

import "errors"

// ErrConfig is a Config out of range (Validate names the field).
var ErrConfig = errors.New("agent: bad config")
