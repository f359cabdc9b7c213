// Package solo runs a sequencer alone, without a Raft group: the process
// `seqd sequencer` starts without --cluster. Run listens on the stream
// first and refuses to start over a live session (a second sequencer on
// the same groups would stop every node of the first; Force overrides),
// opens the server end of the configured transport, runs a
// sequencer.Agent on it until its context ends, and prints the ready and
// stopped lines that scripts and `seqd bench` wait for.
//
// It is a package of its own, not part of package sequencer (a pure core
// and its agent, no sockets of its own choosing) nor of cluster (which
// links hashicorp/raft, which a lone sequencer does not need): it is the
// composition of the two layers below it, sequencer and transport/open,
// as cluster.Process is for a member.
//
// Main types: Config (DefaultConfig, Validate), Run.
//
// Concurrency: Run blocks until its context ends or the agent fails; it
// locks its goroutine to an OS thread over UDP (see Run).
package solo
