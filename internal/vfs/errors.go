package vfs

import "errors"

// ErrNoPreallocate is Preallocate's answer for a file it cannot reserve
// space for (not an operating-system file, or not on Linux).
var ErrNoPreallocate = errors.New("vfs: preallocation not supported for this file")
