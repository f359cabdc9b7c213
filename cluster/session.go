package cluster

// NewSessionID draws the id of a session that follows prev (0: a new
// cluster), at wall time wallNS (ns since the Unix epoch): the time, as a
// standalone sequencer numbers its session, or prev+1 when the clock is
// not past prev (ids only grow, fsm.ErrSessionNotAfter). Two clusters
// bootstrapped one after the other get different ids, so a store of one
// cluster's session refuses another's stream (every cluster used to be
// session 1). A test that needs the id fixed fixes Deps.Clock.
func NewSessionID(prev uint64, wallNS int64) uint64 {
	if wallNS > 0 && uint64(wallNS) > prev {
		return uint64(wallNS)
	}
	return prev + 1
}
