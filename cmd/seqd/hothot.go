package main

import "time"

// defaultActiveTimeout is sequencer.active-timeout's default. A hot-hot
// instance heartbeats every 50 ms (node.HotHotHeartbeat), so 250 ms rides
// out four lost heartbeats or a stall of the instance's host (a GC pause,
// a loaded two-core box) without a spurious switch, while a dead active
// instance costs its account at most about a quarter of a second of
// output before its partner takes over.
const defaultActiveTimeout = 250 * time.Millisecond
