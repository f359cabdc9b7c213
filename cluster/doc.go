// Package cluster makes the sequencer fault-tolerant (DESIGN.md,
// "Stability and failover"): a hashicorp/raft group elects the primary and
// replicates the failover state (package fsm), while the stream itself
// travels only on the data path described here.
//
// # Data path
//
//   - Quorum (pure): the primary's stable seq, the highest seq held by a
//     majority of the current epoch's voters, the primary included. Acks
//     count only from voters of the current epoch and for that epoch.
//   - Standby: follows the stream with the pure receiver (fast mode,
//     Persist), appends it to a replayer.Store, applies every record to a
//     sequencer.State (dedupe table, incarnations, timers, activation),
//     and acks the highest contiguous seq it holds (durably, by default)
//     to the primary in a wire.Status with StatusStandby and its member id.
//     Seal, CatchUp and Takeover turn it into the next epoch's primary.
//   - FetchServer and Fetch: a small TCP range protocol by which a member
//     fetches the packets of a sealed epoch it lacks from another.
//
// On the primary, the Node's shell hands every frame to a QuorumAcks
// (NewQuorumAcks, the Deps.Acks of an epoch) and moves stable to its
// Stable; a primary run by sequencer.Agent uses Agent.SetStableFunc with
// SharedQuorum.Update instead (the Core queues the acks it receives).
//
// # Concurrency
//
// Quorum is not safe for concurrent use. Standby runs on the goroutine of
// Run; Seal, Contiguous and the FetchServer's reads are safe from other
// goroutines (one mutex, held per stream frame and per fetch chunk).
// Takeover is called after Run returned.
package cluster
