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
// Gaps: a gap (from data, heartbeats or stable) is NAKed after a seeded
// random delay, then with exponential backoff up to NakMaxDelay; one NAK
// covers the region from the first to the last missing seq (or the first
// hole of a large message), and it is cancelled as soon as a repair (ours,
// or one multicast for another receiver) fills it. NAKs go to
// Config.PreferredSource (the sequencer by default); a Gone from the source
// asked moves them to the next source, and so does a source that answers
// neither repair nor Gone within RepairSourceTimeout (SourceTimeouts);
// a Gone from the last one stops the
// receiver with ErrUnrecoverable naming the whole missing range. A Gone is
// honoured only from the source asked, in the current session and epoch,
// and for a range asked.
//
// Epochs: every header carries its epoch's first seq (EpochStart). The
// receiver keeps a table of those starts (cuts), and a record's epoch is
// derived from its position (the newest epoch starting at or below its
// seq), not from the header that carried it: a repair of a seq below a
// cut, from a ring or a replayer, is accepted after the next epoch began,
// and two receivers, or a replay, see the same epoch for the same seq.
// Packets of an older epoch are accepted only below that epoch's cut
// (when the receiver missed where the next epoch began, up to the packet's
// stable: every failover keeps what was stable). A
// newer epoch is accepted only with a valid start (above every stable seq,
// not below the current epoch's start, consistent with the table), else it
// is counted (BadEpoch) and dropped; one starting at or below the stable
// believed is also reported (EpochBelowStable, Step returns
// ErrEpochBelowStable) and, once it alone was live for SessionTimeout,
// stops the receiver with that error. In Fast mode, an epoch start learned
// from any header or EpochStart record, repairs included, at or below a
// seq delivered from an older epoch stops the receiver with ErrDiverged
// (runTable remembers where delivery entered each epoch).
//
// Stable: Safe mode delivers up to the stable seq carried by current-epoch
// headers; a stable more than StableLeadSeqs beyond the highest seq seen is
// counted (WildStable) and ignored.
//
// Reassembly: fragments are reassembled by byte offset into buffers that
// grow as bytes arrive (never to the size a packet declares), under one
// receiver-wide budget (MaxReassemblyBytes); when it is full, buffers of
// records above the one being stored are dropped and fetched again, so
// the next message can always complete. A message above
// MaxReceiveMessageBytes stops the receiver with ErrTooLarge.
//
// Sessions: Config.Session 0 follows the first live session, and never
// ignores another live one in silence, whatever the order of session ids:
// see otherSession. Config.Rewind makes a late joiner repair the stream
// from RewindFrom; by default it starts live. The repairs may come by NAK
// or from a rewind (StepRewind: a replayer's stored stream over TCP, fed
// in order while live packets keep arriving through Step; SetRewinding
// holds NAKs and reports read-only status meanwhile).
//
// Status: every StatusInterval the receiver reports its position
// (wire.Status: contiguous and delivered seqs, ReadOnly and Replayer flags)
// to the sequencer, for its flow control.
//
// Hot paths (Step delivering in order, buffered delivery, NAK sending)
// allocate nothing once warm; alloc_test.go asserts it. Fatal errors are
// sticky (Err).
package receiver
