// Package check verifies a delivered stream as a user of seqd would: the
// sequence numbers are dense (no gap, no repeat), each sender's commands
// arrive once and in order within each of its incarnations, and a digest
// of everything delivered lets two receivers prove they saw the same
// stream. `seqd node`, the failover drill's nodes and the simulator check
// their streams with it.
//
// Stream is a pure core: Observe takes one delivered message and returns a
// Verdict value (what, if anything, is wrong with it); the caller decides
// whether a fault stops it (`seqd node`), is counted (the drill: Lost and
// Dup) or fails a run (the simulator). Observe allocates nothing once every
// sender is known, so a throughput node can check every message.
//
// Concurrency: a Stream is used by one goroutine at a time.
package check
