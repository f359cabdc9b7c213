// Package fsm is the Raft state machine of seqd's failover state: the
// current session id, the current epoch and its primary, the cut of each
// epoch (its last seq), periodic (seq, sequencer time) checkpoints and the
// cluster's members. It holds no messages: the stream is replicated by
// standbys and replayers, not by Raft (DESIGN.md, "Stability and
// failover"). Only fsm and cluster import hashicorp/raft.
//
// # Main types
//
//   - State: one immutable value of the failover state. State.Apply is the
//     pure, deterministic transition function (no clock, randomness or map
//     order): it returns a new State and an error when the command breaks a
//     rule. The rules sit on each command type's doc comment.
//   - Command: NewSession, BeginEpoch, AddCheckpoint, AddMember,
//     RemoveMember, SetRole, SealEpoch, encoded by Encode/AppendCommand and parsed by
//     Decode in a small versioned binary format (version byte, kind byte,
//     fixed-width big-endian fields; exact length).
//   - FSM: the raft.FSM. Apply decodes a log entry and applies it; its
//     response (read it with Response) is the *State after the command, or
//     the error saying why the command was rejected, so a proposer learns
//     the reason from ApplyFuture.Response. Snapshot/Restore use the
//     versioned, checksummed format of AppendSnapshot/DecodeSnapshot;
//     Restore refuses a snapshot whose state breaks an invariant.
//
// # Rules in brief
//
// Session ids and epochs only grow; NewSession and BeginEpoch are
// compare-and-set, so a stale or repeated proposal is rejected, never
// applied twice; tables are bounded by constants that are part of the
// format; every member rejects the same entry with the same error. The
// new Raft leader seals the epoch first and only then proposes
// BeginEpoch{e+1, itself, cut}, so the new epoch starts at the committed
// cut + 1. The rules in full, and how the cluster uses the FSM
// (bootstrap, checkpoints, failover, membership): docs/fsm.md.
//
// # Concurrency contract
//
// Raft calls FSM.Apply, Snapshot and Restore from one goroutine, one at a
// time. FSM.State may be called from any goroutine at any time: FSM keeps
// an atomic pointer to an immutable *State and swaps it after each Apply or
// Restore, so readers never lock, never block Raft and never see a
// half-applied command. A *State is never modified after it is published;
// its slices are reachable only through methods that return copies.
// FSMSnapshot.Persist encodes the State captured by Snapshot on Raft's
// snapshot goroutine while Apply goes on. There are no locks. FSM.Notify
// hands in a channel the FSM signals after each Apply and Restore with a
// send that never blocks (tokens coalesce), so an observer learns of new
// state without Raft ever waiting on it.
package fsm
