// Package node is the application side of seqd: the API a Handler uses to
// read the totally ordered stream and send commands, the receiving and
// sending state machine (Core), and a thin shell (Node) that runs it over a
// transport.Client.
//
// # Main types
//
//   - Handler: OnMessage(*Message) gets every message of the stream, in
//     order, internal ones included; Message.Mine says this account sent
//     it, Message.Time is sequencer time, and Message.Payload is valid only
//     during the call. Optional interfaces: ActivationHandler (hot-hot:
//     Config.HotHot numbers sends from the stream, see docs/node.md),
//     OOBHandler (out-of-band commands on arrival),
//     TimerHandler (centralized timers, SetTimer), LocalTimerHandler,
//     RejectionHandler (a command the sequencer refused: a *RejectedError,
//     errors.Is(err, ErrRejected)).
//   - Config (DefaultConfig, Validate): account, instance, Mode (safe or
//     fast), the send window, resend timeouts, Rewind and Commit(seq) for a
//     restart from a snapshot.
//   - Node (New, Run): the shell. Send, TrySend, SendContext and the
//     timer calls give each command its cmdSeq; a command is resent until
//     it appears in the stream, so the application never deduplicates.
//   - Core: the pure state machine under Node: Step(now, frame) and
//     Tick(now), no goroutines, locks or clock; the receiving half is the
//     receiver package. The application sees sequencer time (Now) only, so
//     a replay makes the same decisions.
//   - Archive (OpenArchive) and Replay: a replayer's session directory run
//     through a Handler offline, exactly as a live node delivered it.
//
// Fatal errors end Run: ErrUnrecoverable, ErrDiverged, ErrNewSession,
// ErrTooLargeReceived from the receiver (sticky: Err); ErrSuperseded and
// ErrDuplicateSender from the send half (another process with this
// identity); ErrRewind when no replayer can finish a rewind.
//
// # Concurrency
//
// Only the goroutine in Node.Run touches the Core and the client; it reads
// the local clock once per loop iteration. Send, TrySend, SendContext,
// SetTimer, SetLocalTimer etc. may be called from any goroutine: they copy
// the request into a mutex-guarded queue that Run applies to the Core,
// and the mutex is never held while the Core runs, so a callback can
// never deadlock on it. Callbacks run on Run's goroutine and send with
// TrySend (a full window returns ErrWindowFull at once): only Run frees
// window space. Send waits for space with BlockWhenFull, at most
// SendTimeout; SendContext until its context ends. Now, Rewinding and
// Incarnation read atomics refreshed before each callback. Hot paths
// (delivering, sending a small payload, an idle Tick) allocate nothing.
//
// The Core, sending (incarnations, acks, resend timers, rejections),
// rewind, callback order, the shell and replay in full: docs/node.md.
package node
