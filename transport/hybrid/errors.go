package hybrid

import "errors"

// ErrNoServers is returned by New when given no inner server.
var ErrNoServers = errors.New("hybrid: no inner servers")
