// Package demo is `seqd demo`: a whole seqd in one process that a new
// user can watch keep its guarantees. With three sequencers (the default)
// it runs a Raft group (each member a cluster.Process, as `seqd sequencer
// --cluster` runs it), a replayer and sending nodes over UDP multicast on
// loopback, kills the primary a third of the way through, and checks that
// every node delivered the same stream (test/check: no gap, no repeat,
// each sender's commands once, one digest) and that the replayer's
// archive replays to it. A bridge pair (package bridge, in process)
// carries the stream to a second site's groups, whose read-only node
// must deliver the same stream (bridge.go); a hot-hot pair answers every
// 100th command of one node, loses its active instance two thirds in,
// and must answer each once (pair.go). With one sequencer it runs over a lossy
// in-memory network (transport/mem).
//
// Main types: Config (DefaultConfig is `seqd demo` with no flags), Run.
//
// Concurrency: Run blocks until the demo ends or ctx does; everything it
// starts is stopped before it returns.
package demo
