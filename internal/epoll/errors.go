package epoll

import "errors"

// ErrClosed is returned by Add on a closed Set; callers map it to their
// transport's closed error.
var ErrClosed = errors.New("epoll: set closed")
