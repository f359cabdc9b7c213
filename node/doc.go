// Package node is the application side of seqd: the API a Handler uses to
// read the totally ordered stream and send commands, the receiving and
// sending state machine (Core), and a thin shell (Node) that runs it over a
// transport.Client.
//
// # Core (pure)
//
// Core has no goroutines, locks or clock. Step(now, frame) feeds a stream
// packet, heartbeat or Gone; Tick(now) runs timers (NAKs, resends, local
// timers, frame flush). now is the caller's monotonic clock in ns and is
// used only for those local timers; the application sees sequencer time
// (Now) only, so a replay makes the same decisions.
//
// Receiving is the receiver package's job (gap detection, NAKs, fencing by
// (epoch, seq), stable, reassembly under a byte budget, session liveness,
// status frames to the sequencer's flow control): Step and Tick feed it,
// then act on its Ready in its order (frames to send, then messages to
// deliver) and Advance it. Each delivered message that is internal or of
// this account first goes to the send half in one call (observe), then
// to OnMessage. Delivery order, Rewinding, safe and fast modes and the
// receiving fatal errors (ErrUnrecoverable, ErrDiverged, ErrNewSession,
// ErrTooLargeReceived) are the receiver's; fatal errors are sticky (Err).
// A node starts from the live tail unless Config.Rewind is set.
//
// Rewind: with Config.Rewind (or Config.Commit(seq) after restoring a
// snapshot) and Node.SetRewindAddr, Run opens a rewind connection to a
// replayer (rewind.go; docs/protocol.md "Rewind") and feeds its packets
// to the Core as repairs (Core.StepRewind) while the live stream is
// buffered; NAKs wait meanwhile; the connection closes once the Core
// caught up (Core.RewindCaughtUp). Rewinding() is false from the first
// message delivered at or above the first seq seen live.
//
// Sending: commands are numbered 1, 2, ... per incarnation. Every process
// start must use a larger Config.Incarnation (New uses the wall clock): the
// sequencer then publishes InternalIncarnation and expects cmdSeq 1, so a
// restarted node never has fresh commands dropped as duplicates, and its
// old commands seen while rewinding do not ack new ones (acks count only
// after this incarnation's InternalIncarnation). A node that sees its
// Account/Instance announced with an incarnation at or above its own
// before its first command (rewinding over an earlier life) moves above
// it; after that, another incarnation announced stops it with
// ErrSuperseded. Each unacked command keeps a checksum of its payload: a
// command of this identity in the stream that this process did not send
// (two processes given one incarnation) stops it with ErrDuplicateSender
// instead of acking ours. When the sequencer has no entry for this sender
// (InternalSenderForgotten, or a RejectSenderTableFull rejection) the
// node starts a new incarnation whose wire cmdSeqs count from 1 again;
// the numbers Send returned do not change. Commands are batched into frames of
// MaxPacketBytes, fragmented when large, kept in a window of Config.Window
// copies, and acked by seeing (account, instance, cmdSeq) in the delivered
// stream, or an InternalRejected for it: the sequencer refused it, the
// slot is freed, and OnRejected gets a *RejectedError (ErrRejected and
// the reason). Each command has its own resend timer: the ack latency is
// measured (srtt, rttvar, as TCP does, ignoring resent commands) and a
// command is resent once no ack came for srtt + 4*rttvar (ResendInterval
// before the first sample; within MinResendInterval..MaxResendInterval)
// since it was sent, since the last ack, or since the node caught up with
// the stream up to where the command can appear, whichever is last. So
// late acks that keep coming, a rewind or a repair cost no resends, and a
// lost command goes again with the ones behind it that the sequencer
// dropped. The timeout doubles while the oldest command times out with no
// ack between, and an ack drops the backoff. observe (send.go) is the one
// place where delivered records reach the sending half.
//
// Callbacks: OnMessage gets every message, internal ones included. After
// it, InternalNodeActivated/Deactivated and InternalTimer for this
// account and instance call OnActivated/OnDeactivated/OnTimer when the
// Handler implements them; OnRejected comes before the OnMessage of the
// rejection record. A SilenceHandler hears OnStreamSilent from Tick when
// no stream packet came for SilenceTimeout (a group without a quorum
// publishes nothing), and OnStreamResumed from the Step of the next
// packet. Callbacks may call the Core's Send, SendTimer,
// CancelTimer, SetLocalTimer and Flush, never Step or Tick.
//
// Hot paths (Step delivering, Send of a small payload, idle Tick) allocate
// nothing; alloc_test.go asserts it.
//
// # Node (shell)
//
// Only the goroutine in Node.Run touches the Core and the client: it polls
// the client (waiting at most 1ms), steps the Core, ticks it and flushes,
// reading the local clock once per loop iteration. Send, TrySend,
// SetTimer, SetLocalTimer etc. may be called from any goroutine: they copy
// the request into a mutex-guarded queue that Run applies to the Core
// (right after each frame, so replies from a callback leave with that
// batch), and give each command its cmdSeq at once (the Core numbers them
// in the same order). The mutex is never held while the Core runs, so a
// callback can never deadlock on it. Only the first request queued while
// Run blocks in Poll wakes it (transport.Waker). A full window makes
// TrySend and the timer calls return ErrWindowFull at once; Send waits
// for space with BlockWhenFull, at most SendTimeout, and SendContext until
// its context ends; both end when Run does. Callbacks send with TrySend:
// only Run frees space, and it is busy running them. Now, Rewinding and
// Incarnation read atomics refreshed before each callback.
//
// # Replay
//
// Archive (OpenArchive) and Replay run a session archive, the segment
// directory a replayer wrote (replayer.OpenArchive reads it without
// changing it), through a Handler offline: the stored packets are stepped
// into a read-only Core, so the Handler sees exactly what a live node of
// the given account delivered (Mine, epochs, the records a failover cut
// dropped, internal messages and their callbacks), at full speed and with
// no allocation per message. Tests replay an archive with the
// application's own Handler; `seqd replay` is the command-line shell.
package node
