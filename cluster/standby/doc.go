// Package standby is a standby sequencer's data path (DESIGN.md,
// "Stability and failover"): it follows the stream, persists it, applies
// every record to a sequencer.State (dedupe table, incarnations, timers,
// activation) and acks the highest contiguous seq it holds to the
// primary, ready to take over.
//
// # Main types
//
//   - Core (pure): the receiver in fast mode with Persist, the stream
//     into a replayer.Store in stream order through a replayer.Persister
//     (the follow-and-persist path the replayer's Service shares), the
//     State, the snapshots a Takeover below the State rebuilds from, the
//     seal, and the heal of a store whose tail a failover cut. Input:
//     Step(now, frame), Tick(now), Ack(now), FinishSync; output: Ready
//     (the NAKs, then the ack) and StartSync (the fsync due), in the
//     order persist, send, deliver/ack. No goroutines, locks, timers or
//     sockets; the store is its one dependency.
//   - Agent (shell): the Core under one mutex, its stream client, the
//     fsync goroutine (replayer.Syncer) and the clock; Run drives it with
//     the agent runner (Poll, DoWork, NextDue), or a simulator steps it
//     (Step, Work). It is the cluster's Follower: Seal, CatchUp (fetch
//     from peers through Config.Fetch, cluster.Fetch), CatchUpFrom,
//     KnowEpoch, HeldEpoch, Takeover, and FetchRange for a fetch server.
//   - Config (DefaultConfig, Validate), Stats, the sentinels in errors.go.
//
// A reopened standby does not apply the whole session again: every
// SnapshotEveryRecords the State's snapshot is also written beside the
// store (two files in turn, CRC-checked, snapfile.go), and NewCore starts
// from the newest one that still describes the store's prefix (its
// session, a seq the store holds, the epoch of the store's record there)
// and applies only the records after it (Opened says which, and why a
// file was not believed). A rebuild of the State below a file (a heal, a
// late KnowEpoch, a Takeover at a lower cut) removes it.
//
// An ack is a wire.Status with StatusStandby and the member id: by
// default (AckWritten) the seq written (it survives the process, not the
// machine), without AckWritten the seq fsynced (durable). Nothing of a sealed epoch
// is acked or taken from the stream until a newer epoch begins.
//
// # Concurrency
//
// Run (or Step and Work, never both) owns the loop. Seal, CatchUp,
// CatchUpFrom, KnowEpoch, Stats, Err, Snapshot, FetchRange and Takeover
// are safe from other goroutines: each takes the Agent's mutex, which
// the loop holds per stream frame and per turn, never while it waits in
// Poll. Contiguous is an atomic read. After Takeover the store belongs
// to the new primary, whose History reads it under the same mutex.
package standby
