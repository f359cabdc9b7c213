package solo

import "errors"

// ErrConfig is wrapped by Validate's errors about this package's own
// fields.
var ErrConfig = errors.New("solo: invalid config")
