// Package sim is seqd's deterministic simulator: a sequencer core and
// several node cores on one goroutine, a virtual clock, and a mem network
// with seeded loss, duplication, reordering, delay and partitions.
//
// A checker runs after every step and asserts the guarantees of DESIGN.md:
// each node's delivered stream is a prefix of the sequencer's stream, with
// no gap; each command is delivered exactly once even when resent; the
// sequencer's clock never goes back; a read-only node sends no command.
// At the end every command has been acknowledged and every node has
// delivered the whole stream (liveness). Each message is compared whole
// (account, instance, command seq, time, flags, epoch, internal payload),
// and the State applied from the published stream must equal the
// sequencer's after every step.
//
// Scenarios, all on by default (Config; `simrun -without` turns them off
// for a replay): partitions; safe mode behind a lagging simulated standby
// group; sender crashes and restarts as new incarnations that rewind from
// seq 1; centralized timers set and cancelled; a late joiner from the live
// tail; wall clock steps of minutes and an hour; hours of virtual idle;
// and up to three epoch changes a run, each cutting the stream anywhere
// from stable to the last seq published, with a new primary built from
// the surviving stream's State and history (epoch.go), fast nodes that ran
// past a cut required to stop with ErrDiverged. The last packets of each
// ended epoch are published again after the change, at once and 0.5-50
// ms later (a deposed primary's datagrams delayed or replayed: stale.go);
// receivers must fence their cut-off tail. One command in 500 is larger
// than the sequencers' MaxMessageBytes: every primary must refuse it (an
// InternalRejected record, never the command) and its node hear of it
// once (OnRejected).
//
// With Cluster (on by default) the sequencer is a group of three members
// (cluster.go): the standbys are real standby.Agent followers (driven
// by Step and Work, each store on its own vfs.MemFS, kept across the
// member's crashes) whose acks make the primary's
// stable through cluster.QuorumAcks, and epoch changes run through
// cluster/failover's core, the one the member runs (election.go), over a
// simulated Raft log (an fsm.State) and control path; only the Raft
// leader's choice is seeded here. Primaries are killed, cut off from
// their standbys or from Raft only; standbys killed (one for long while
// the primary restarts; one right after its seal answer), cut off,
// slowed or slow to answer the seal; a node is cut off across two epoch
// changes. The leader's State at the cut, stable against what a majority
// holds after every step, and every member's store and State at the end,
// are checked. With PowerLoss (off by default: `simrun -with
// powerloss`) the standbys ack only what they fsynced, and a standby now
// and then loses power and restarts from MemFS.CrashClone; so does the
// replayer, at one crash in two, which must reopen holding every record it
// had fsynced and repair the rest. With
// Checkpoints (on by default) the primary records checkpoints in the
// failover state as cluster.Member does, bounded by what a majority
// holds; one in twenty overshoots past anything published (as forged
// acks once made it) and the primary fails at once, so the core must
// drop it; every checkpoint must lie within the surviving stream and
// carry its record's time (checkpoint.go).
//
// With Replayer (on by default) a replayer.Service (driven by Work, store
// on a vfs.MemFS) follows the stream and answers NAKs on a network of its
// own; the sequencer's ring is small (512 KiB), so restarted nodes and a
// late joiner that rewind from seq 1 while the stream runs are repaired
// through it once the ring evicted. It crashes and restarts; at the end
// its store must hold the stream, record by record, with each epoch.
// With RewindStream (on by default) a read-only node joins at seq
// 900-1700 and rewinds from seq 1 over the replayer's rewind stream (a
// replayer.Reader on its store's Tip, fed to Core.StepRewind, as
// node.Node does over TCP), which resets now and then and dies with the
// replayer, and resumes from Core.ResumeFrom (rewind.go).
//
// With Bridge (`simrun -with bridge`; see Config.Bridge for when make sim
// runs it) a second site with its own mem network is joined to the origin
// by a bridge (bridge.go): the sending end a real replayer.Service on a
// MemFS store, the receiving end a real replayer.Service fed through
// bridge.ReceiveCore (the receiving end's Merge, heartbeat and gap timer),
// a TCP-like channel (ordered, reliable, cut for spells, reconnecting
// from the merged position) and a UDP-like one each way (seeded loss,
// duplication, reordering, delay and partitions), and two nodes on the
// far site, one of which sends commands back through the bridge. Checked
// after every step: what the receiving end republishes is the origin's
// stream from seq 1, no gap, no packet that brings nothing new, nothing
// of a cut epoch; the far nodes' deliveries are checked like every
// node's; each far command is sequenced at most once. At the end each is
// sequenced exactly once and both ends' stores hold the stream.
//
// With StoreFaults (`simrun -with store`) a bit is flipped in the
// replayer's store, or a member's, while it is down; a store that opens
// must no longer hold it, one that refuses is restored (the replayer) or
// moved aside for an empty directory that fetches the stream from the
// other members (a member: storefaults.go).
//
// Everything random comes from the seed, so a failure replays exactly with
// the command that Result.Replay prints.
package sim
