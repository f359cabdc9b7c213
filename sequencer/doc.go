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
// simulator can drive a Core step by step. Output goes to
// a Sink, synchronously: Publish for stream packets (to everyone), SendTo
// for unicast replies (retransmits, Gone). A packet handed to the sink is a
// view of the retransmit ring, valid only during the call.
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
// command frame the order is: InternalNodeActivated (the account's first
// instance heard from), InternalIncarnation (a larger incarnation than on
// record), then its accepted commands in cmdSeq order. A CmdTimer command
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
// safe for concurrent use, and the Sink is called on that goroutine.
//
// # Allocation
//
// New allocates the dedupe table; the ring's memory is allocated in 4 MiB
// chunks as packets fill it, and its index doubles as it grows, so that
// memory follows use up to RingBytes. In steady state Step (a
// command frame from a known sender, or a NAK), Flush and Tick allocate
// nothing. A new sender, a new timer, and the reassembly buffer of a
// fragmented command larger than any before from that sender allocate once.
package sequencer
