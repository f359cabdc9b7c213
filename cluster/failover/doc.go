// Package failover is the epoch change as a pure core (DESIGN.md,
// "Stability and failover"): what a new Raft leader does, step by step,
// until it starts as primary. It has no goroutines, sockets, HTTP, timers
// or Raft; the cluster member and the simulator (test/sim) are its shells
// and drive the same code. Its protocol scenarios are datadriven scripts
// in testdata/.
//
// # Main types
//
// Change is one leadership: New(cfg, state, now), then Step(now, msg) for
// each answer (Committed, Rejected, SealRecorded, SealReply, Fetched,
// TookOver) and Tick(now) for time; after each, Ready says what to do:
// a Barrier or one proposal (DropCheckpoints among them), RecordSeal, the Seals to send, a Fetch, the
// TakeOver, Start, StepAside. CheckSeal is the sealed member's side.
//
// # Decisions the core owns
//
//   - Bootstrap: before epoch 1 it records every Config.Bootstrap member
//     the state lacks, one proposal at a time, then a session.
//   - No primary in the current epoch: nothing was sequenced; the cut is
//     the epoch's start - 1, no seal.
//   - The seal is recorded (Raft or each member's disk, the shell's
//     choice) before any member is asked (RecordSeal): a member restarted
//     between its answer and the commit acks the sealed epoch no more.
//   - Seals go to every voter, this member and the sealed epoch's
//     primary included. Every answer of a voter for the sealed epoch
//     counts, the old primary's like a standby's: a primary counts
//     toward stable only what it wrote, so after a restart its store
//     still holds all it counted. Answers of another epoch (an earlier
//     attempt's, a delayed one) and of non-voters never count.
//   - Quorum: SealQuorum(n) = n - n/2 answers, the fewest that intersect
//     every majority (2 of 3, 2 of 4, 3 of 5).
//   - capStale: an answer whose newest record is of an older epoch than
//     the sealed one is capped at that epoch's cut and is no fetch source.
//   - Grace: once a quorum answered, the rest get GraceNS; all voters
//     answered ends it at once; SealTimeoutNS without a quorum fails the
//     attempt.
//   - The cut is the MAXIMUM of the counted answers (never below the
//     epoch's start - 1); the new epoch starts at cut + 1, after a fetch
//     of what this member lacks (peers best first) and a takeover, and
//     only then is BeginEpoch{e+1, self, cut} proposed.
//   - A checkpoint above the cut: a quorum of answers meets every
//     quorum, so no quorum held it (forged standby acks raised stable, or
//     a power cut took the writes), and BeginEpoch refuses a cut below
//     it. The core waits for every voter's answer or the seal's timeout
//     (not the grace: one that holds it may be slow), then proposes
//     fsm.DropCheckpoints above the cut, so no leader is stuck on it.
//   - Clock floor: the new epoch's StartTime is the latest of the last
//     checkpoint's time and every counted answer's LastStamp (which
//     includes the old primary's last heartbeat a member saw); it is
//     in TakeOver.StartTime too, as the shell opens the sequencer there.
//   - Failure: the next attempt reads through a barrier after RetryNS; a
//     proposal rejected on a state read without a barrier is retried at
//     once; MaxFailures in a row ask the shell to step aside.
//   - A member refuses to seal an epoch its failover state has not
//     reached (CheckSeal).
//
// # Concurrency
//
// A Change is not safe for concurrent use: one shell goroutine steps it.
// Values in Ready belong to the shell once returned.
package failover
