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
//   - the standby (package cluster/standby, standby.Agent): follows the
//     stream, persists it, applies it to a sequencer.State and acks the
//     highest contiguous seq it holds to the primary; Seal, CatchUp and
//     Takeover turn it into the next epoch's primary.
//   - PeerServer: a member's peer port (the peer protocol of wire/peer.go,
//     one TCP connection per request): Fetch, by which a member fetches
//     the packets of a sealed epoch it lacks from another; RequestSeal;
//     RequestPeerStatus. Members talk to each other only there and on
//     Raft's transport.
//
// On the primary, the Member's shell hands every frame to a QuorumAcks
// (NewQuorumAcks, the Deps.Acks of an epoch) and moves stable to its
// Stable; a primary run by sequencer.Agent uses Agent.SetStableFunc with
// SharedQuorum.Update instead (the Core queues the acks it receives).
//
// # Control path
//
// Member is one sequencer process of the group: hashicorp/raft over the
// failover state of package fsm, on the stores and transport handed to
// NewMember in Deps.Raft (OpenRaft's in production: log and stable store
// in raft-boltdb/v2, file snapshots, TCP transport; hashicorp/raft's
// in-memory twins in tests), bootstrapped from MemberConfig.Members, with
// members added and removed live (AddMember, RemoveMember: raft's
// configuration and the fsm's member table). Timings come in named
// profiles: LANTimeouts (300 ms heartbeat and election, 290 ms leader
// lease, the default), WANTimeouts and TestTimeouts. A dead leader process
// is not left to the heartbeat timeout: the death watch (deathwatch.go)
// sees the leader's connections end, finds its Raft port refusing, and
// has the lowest surviving voter start an election at once (raft's
// TimeoutNow, sent to itself); a silent leader (a partition) is checked
// exactly a heartbeat timeout after its last contact (promptcheck.go);
// pooled Raft connections whose peer restarted are redialed before a
// request, not failed by it (freshconn.go). The timeouts can then be long
// enough to ride out a starved leader (docs/failover-timing.md).
//
// The Raft leader is the primary. On becoming leader a Member runs the
// epoch-change core (cluster/failover, the simulator's too; lead.go is its
// shell): it records the bootstrap members still missing before epoch 1
// and a session if there is none, records the seal of the current epoch
// in Raft (fsm.SealEpoch: a standby opened later seals it before it
// follows the stream), seals it on every voter through their peer ports
// (RequestSeal, answered by Member.Seal after failover.CheckSeal), takes
// the highest contiguous seq reported as the cut once n - n/2 voters
// answered (plus a commit timeout of grace for the rest), catches its
// standby up to it, stops its standby and builds the primary's Core with
// sequencer.NewPrimary on the standby's State and store (Takeover), and
// only then commits BeginEpoch{e+1, itself, cut} and sequences from
// cut+1. Every voter's answer counts, the sealed epoch's primary's too: a
// primary counts toward stable only what its store wrote (primarySelf),
// and, deposed but still running, answers a seal for what it wrote and
// counts no more. The first attempt reads the state without a Barrier
// (every proposal is a compare-and-set the FSM checks, and a rejected one
// is retried through a Barrier); a leader that fails three
// epoch changes hands the leadership to another member. A primary stops
// sequencing at once when raft reports it is no longer leader (raft steps
// down by itself when a quorum is silent for the leader lease), and runs
// a new standby on the same store. While primary it records (stable,
// time) checkpoints through Raft.
//
// A member restarted on its directory opens its standby only once its
// failover state has caught up with the group (Raft restores the snapshot
// at start but applies the log only when a leader says what is
// committed), so the standby knows every epoch start before it follows
// the stream; later epoch starts reach the running standby as the FSM
// applies them (fsm.FSM.Notify).
//
// The admin endpoint, for people, serves `seqd admin` (package ops: the
// Member is an ops.Member behind ops.AdminHandler): GET /v1/status, POST
// /v1/transfer (TransferPrimary: a planned handover that stops the
// primary once its standbys hold what it published, then transfers the
// Raft leadership; the pause is measured) and /v1/members.
//
// For failover drills, MemberConfig.RaftStream takes a PartitionLayer: a TCP
// stream layer that a drill cuts off (held connections closed, dials
// refused, accepts closed) and heals (`seqd sequencer --fault-addr`).
//
// # Concurrency
//
// Quorum is not safe for concurrent use. The standby's contract is in
// package cluster/standby.
package cluster
