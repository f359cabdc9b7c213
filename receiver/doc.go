// Package receiver is the pure receiving half of every seqd process that
// reads the stream: nodes, `seqd tail`, and next standbys, replayers and
// bridges. It turns stream frames, in any order, with loss and duplicates,
// into the one totally ordered stream, and says what to send to get there.
//
// # Shape
//
// Receiver is a state machine modelled on etcd-io/raft's RawNode: input
// arrives through Step(now, frame, from) and Tick(now); output accumulates
// in a Ready value that the shell handles, in this documented order, and
// then acknowledges with Advance:
//
//  1. Ready.Persist: stream frames that brought new records (with
//     Config.Persist, for replayers and standbys), to be written first;
//  2. Ready.Send: frames to send (NAKs to a repair Source, Status to the
//     sequencer);
//  3. Ready.Deliver: whole messages, in seq order, each once.
//
// No callbacks run inside Step. A Payload in Ready.Deliver is a view of the
// frame given to Step (in-order records are delivered with zero copies) or
// of the receiver's ring, valid until Advance.
//
// # Concurrency
//
// None: no goroutines, locks, clocks, timers or sockets. One goroutine
// calls every method. now is the caller's monotonic clock in ns, used only
// for local timeouts (NAK pacing, status, session liveness); the
// application sees sequencer time (Now), so a replay decides the same.
// NAK jitter comes from Config.Seed.
//
// # What it does
//
// Gaps are NAKed after a seeded random delay with backoff; epochs are
// fenced by (epoch, seq) from the table of epoch starts every header
// carries; Safe mode delivers up to stable, Fast on arrival (ErrDiverged
// if a failover cuts what it delivered); fragments are reassembled under
// one byte budget; a late joiner rewinds (StepRewind). Hot paths
// (delivering in order, buffered delivery, NAK sending) allocate nothing
// once warm; alloc_test.go asserts it. Fatal errors are sticky (Err).
//
// Gaps and NAKs, epochs, stable, reassembly, sessions and status in full:
// docs/receiver.md.
package receiver
