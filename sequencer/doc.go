// Package sequencer is the pure sequencing state machine of seqd: it
// dedupes commands, numbers them densely, stamps them with a clock that
// never goes back, batches them into stream packets, fragments large
// messages, keeps a retransmit ring that answers NAKs, and emits the
// internal messages (session and epoch start, incarnations, hot-hot
// activation, centralized timers, heartbeats).
//
// # State machine
//
// A Core has no goroutines, locks, timers, sockets or wall clock. Input
// arrives through Step(now, frame, from) (a command frame or a NAK),
// Flush(now) (the shell's input is drained), Tick(now) (time passed) and
// Emit(now, m) (an internal message from the cluster layer); time is always
// passed in (a Time: one reading of a monotonic and a wall clock), so the
// simulator can drive a Core step by step. Output is a value, as
// receiver's Ready is: the calls accumulate a Ready (Packets to
// everyone, in order: data packets, heartbeats, repairs sent to
// everyone; then Replies, each to its peer: retransmits and Gones) that
// the shell hands to its transport and acknowledges with Advance. The
// Core never calls out, so nothing the shell does with its output (a
// cluster primary writes its packets to the store its repairs read
// from) can re-enter it. A data packet in Ready is a view of the
// retransmit ring, the rest is built in a buffer reused after Advance:
// nothing is copied or allocated per message. SendReady hands a Ready to
// a transport.Server; SinkShell hands it to a Sink after each call
// (tests, the simulator).
//
// # Three parts: State, publishing, repair
//
// State is what the stream determines: the dedupe table (per (account,
// instance): incarnation, last command seq), hot-hot activation, the
// centralized timers, and the position (last seq and time, the epoch). It
// changes only through State.Apply(record), which every sequenced record
// goes through, and it encodes with Snapshot (versioned bytes) and
// decodes with Restore. The Core decides (which command to accept or
// reject, when a timer is due, when activation switches, which sender a
// full table forgets), emits the record, then applies it through the same
// Apply as a standby reading the stream; so a standby (later, each
// member of the Raft group) that applies the stream holds a State equal
// to the primary's, byte for byte, at every seq, and a new primary's
// dedupe table is rebuilt from the stream by construction: NewPrimary
// starts a Core on a standby's State (or one restored from a snapshot)
// at its next seq, the cut + 1, and answers NAKs at or below the cut from
// the history store it took over. Emit refuses a message the State could
// not apply. What the
// stream does not carry stays in the Core: when each sender was last
// heard (ActiveTimeout, on the monotonic clock) and commands being
// reassembled from fragments. The simulator asserts the equality after
// every step.
//
// Publishing is the rest of the Core: numbering, stamping, batching
// records into packets in place in the ring, fragmenting, stable,
// heartbeats and flow control. Repair answers NAKs from a
// RetransmitStore (below).
//
// Stable: a standalone Core (Config.Standalone) makes every published
// seq stable. In a cluster, stable moves only through SetStable: the
// Core queues the standby acks it receives (wire.StatusStandby) for its
// shell (TakeStandbyAcks; Agent.SetStableFunc hands them to the cluster's
// quorum each loop iteration, before the flush, so the new stable rides
// in that iteration's packets or heartbeat). NewPrimaryAgent runs a
// NewPrimary Core.
//
// # Rejection and bounds
//
// A command the sequencer cannot take is rejected, one by one, never by
// dropping its frame: an InternalRejected record (FlagInternal, the
// requester's account, instance and command seq in the record header,
// payload Account, Instance, ID = cmdSeq, Value = a wire.RejectReason,
// Extra = the frame's incarnation) takes its place in the stream and
// uses its command seq up, so the sender's later commands go on and its
// node turns the record into an error for that command. Reasons: larger
// than MaxMessageBytes; an unknown sender while the table is full of
// senders active within SenderIdleTimeout (this one leaves no entry);
// the reassembly budget (MaxReassemblyBytes) full; MaxTimersPerSender
// reached; a malformed timer request or a period below MinTimerPeriod; a
// fragmented timer request. Each is counted in Stats.
//
// Every table keyed by a remote identity is bounded. Senders: only a
// record in the stream creates an entry (a frame whose commands are all
// dropped leaves none), at most MaxSenders; for a new sender in a full
// table the least recently active one (oldest last record) is forgotten
// if it has been silent in the stream for SenderIdleTimeout: an
// InternalSenderForgotten record, applied like any other, so standbys
// forget the same one. Its dedupe entry and timers go: a resend of its
// old commands could no longer be told from a new command, so the
// forgotten node must start a new incarnation at command seq 1 (the
// record tells it); a command above 1 from an unknown sender is dropped
// as out of order. Reassemblies: MaxReassemblyBytes of declared totals,
// and one silent for ReassemblyTimeout (monotonic) is dropped, freeing
// its budget; buffers grow with the bytes that arrive. Timers:
// MaxTimersPerSender each, periods of at least MinTimerPeriod.
//
// # Time
//
// Every timeout (heartbeats, flush delay, repair pacing, the multicast
// repair window, hot-hot activity) runs on Time.Mono, so a wall clock step
// changes none of them. The wall clock only stamps: sequencer time, the
// stamp of every record and header, is max(last stamp, wall, stamp at the
// last anchor + monotonic time since), starting from Config.StartTime. It
// never goes back; when the wall steps back it keeps advancing at the
// monotonic rate (ahead of the wall until the wall catches up); when the
// wall steps forward it jumps with it. Centralized timers run on sequencer
// time, since every node must see them fire at the same point of the
// stream: after a forward jump a periodic timer fires once and resumes at
// the next period after now, the periods in between counted in
// Stats.TimerSkipped. All commands of one frame share one reading; the
// Agent reads its clock once per poll batch.
//
// # Output order
//
// Sequence numbers are dense and start at Config.FirstSeq. A fresh session
// (FirstSeq 1) begins with InternalSessionStart (seq 1) then
// InternalEpochStart; a later epoch begins with InternalEpochStart. For a
// command frame the order is: InternalIncarnation (a larger incarnation
// than on record, for a known sender), then for each command that is next
// for its sender, in cmdSeq order: for a sender not on record,
// InternalSenderForgotten (a full table makes room), InternalNodeActivated
// (its account has no active instance), InternalIncarnation (a non-zero
// incarnation); then the command, or its InternalRejected. A CmdTimer command
// becomes an InternalTimerSet/InternalTimerCancel record that keeps the
// requester's account, instance and cmdSeq. Tick emits, in order, hot-hot
// switches (InternalNodeDeactivated then InternalNodeActivated) and due
// timers (InternalTimer), then publishes the open packet, then a heartbeat
// if nothing was published for HeartbeatInterval.
//
// Records accumulate in an open packet built in place in the ring; the
// packet is published when the next record does not fit, when its time
// delta would overflow, on Flush, and by Tick. A message that does not fit
// an empty packet is fragmented: each fragment fills a packet of its own,
// only the last may share its packet with later records. Every published
// packet carries the current stable seq; standalone, that is the last seq
// published in full.
//
// # Repair
//
// NAKs are answered from a RetransmitStore (the ring: the newest packets,
// up to RingBytes of them, found by binary search on seq) with the original
// packets flagged PacketRetransmit and stamped with the current stable, at
// most NakAnswerBytes per NAK (at least one packet) and at most
// RetransmitBytesPerSecond together (a token bucket); a range that left the
// store gets a Gone naming the oldest seq still held. The policy sits above
// the RetransmitStore interface, so a replayer's segment store can answer
// the same way.
//
// # Concurrency
//
// A Core is used by one goroutine (the sequencer's shell). Nothing in it is
// safe for concurrent use; its Ready is read on that goroutine.
//
// # Allocation
//
// New allocates the dedupe table; the ring's memory is allocated in 4 MiB
// chunks as packets fill it, and its index doubles as it grows, so that
// memory follows use up to RingBytes. In steady state Step (a
// command frame from a known sender, or a NAK), Flush and Tick allocate
// nothing (State.Apply included). A new account, a new timer, and a
// reassembly buffer (grown as fragments arrive, reused across commands up
// to 1 MiB) allocate.
package sequencer
