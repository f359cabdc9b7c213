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
// # Main types
//
// State is what the stream determines (the dedupe table, hot-hot
// activation, the centralized timers, the position); it changes only
// through State.Apply(record), which the Core and every standby run on
// each sequenced record, so a standby's State equals the primary's byte
// for byte and NewPrimary starts a Core on it at the cut + 1. Core is
// publishing (numbering, stamping, batching in place in the ring,
// fragmenting, stable, heartbeats, flow control) around a State; Agent is
// its shell. Repairer answers NAKs from a RetransmitStore (the ring, or a
// replayer's store). A command the sequencer cannot take is rejected in
// the stream (InternalRejected), never dropped in silence, and every table
// keyed by a remote identity is bounded. Hot-hot accounts: only the
// active instance's commands are sequenced, once per stream-derived id
// (fencing and dedupe in the stream); Core.Activate and Core.ForcePassive
// switch by operator, Controls carries such requests (and State reads)
// into the goroutine that runs the Core.
//
// # Concurrency
//
// A Core is used by one goroutine (the sequencer's shell). Nothing in it is
// safe for concurrent use; its Ready is read on that goroutine.
// Every timeout runs on Time.Mono; the wall clock only stamps, and
// sequencer time never goes back. In steady state Step, Flush and Tick
// allocate nothing.
//
// State, stable, rejection and bounds, time, the order of output records,
// repair and allocation in full: docs/sequencer.md.
package sequencer
