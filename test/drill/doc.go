// Package drill is seqd's failover drill against real processes: Run
// starts, from the seqd binary, three `seqd sequencer --cluster` members,
// a replayer, sending, checking and fast-mode nodes (`seqd drill node`,
// RunNode), faults the primary round after round under load (SIGKILL, or
// a partition through the member's fault endpoint, Faults), times each
// failover and checks at the end that every node delivered the same
// stream (test/check) with each acked command exactly once.
//
// Main types: Config (Run's), NodeConfig (RunNode's), Faults (a member's
// switchable fault injection: a partition of its Raft layer and stream
// sockets, seeded stream loss; StartFaults serves its HTTP endpoint).
//
// Concurrency: Run and RunNode block until done; Faults is safe for
// concurrent use (the endpoint switches it while the transports read it).
// The children are supervised by test/proc: the first that dies on its
// own fails the drill at once.
package drill
