package page

import "errors"

// ErrConfig: a Config field is out of range; the error names it.
var ErrConfig = errors.New("page: bad config")
