package node

import (
	"errors"
	"strconv"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// Sentinel errors. Fatal ones (ErrUnrecoverable, ErrDiverged,
// ErrNewSession, ErrTooLargeReceived, ErrEpochBelowStable, ErrSuperseded,
// ErrDuplicateSender)
// are wrapped with detail and become sticky in Core.Err; test them with
// errors.Is. The receiving half's are the receiver package's values, so
// either name matches.
var (
	ErrWindowFull = errors.New("node: send window full")
	ErrReadOnly   = errors.New("node: read-only node cannot send")
	// ErrTooLarge: Send was given more than MaxMessageBytes (this node's
	// send limit; what it receives is bounded by MaxReceiveMessageBytes).
	ErrTooLarge = errors.New("node: payload larger than MaxMessageBytes")
	ErrConfig   = errors.New("node: invalid config")
	// ErrTimer: a centralized timer request the sequencer could not take
	// (a negative period); wrapped with the value. No command seq is used.
	ErrTimer = errors.New("node: invalid timer request")
	// ErrTimeUnknown: SetTimer before the stream told sequencer time (no
	// message or heartbeat delivered yet): a time relative to it cannot
	// be computed. Wait for the first message, or use SetPeriodicTimer
	// with an absolute time.
	ErrTimeUnknown = errors.New("node: sequencer time not known yet (no message delivered): SetTimer is relative to it")
	ErrClosed      = errors.New("node: closed")
	// ErrArchiveRange: a Replay asked for seqs an archive does not hold
	// (before its first, past its end), or its stream stopped early.
	ErrArchiveRange = errors.New("node: seqs not in the archive")

	ErrUnrecoverable    = receiver.ErrUnrecoverable
	ErrDiverged         = receiver.ErrDiverged
	ErrNewSession       = receiver.ErrNewSession
	ErrTooLargeReceived = receiver.ErrTooLarge
	ErrFrameKind        = receiver.ErrFrameKind
	ErrEpochBelowStable = receiver.ErrEpochBelowStable
	ErrOtherSession     = receiver.ErrOtherSession

	// ErrRejected is wrapped by the *RejectedError a RejectionHandler gets
	// for each command the sequencer refused.
	ErrRejected = errors.New("node: command rejected by the sequencer")
	// ErrSuperseded stops a node whose Account/Instance was announced with
	// another incarnation after it started sending: another process (a
	// restart of this one) took the identity over.
	ErrSuperseded = errors.New("node: superseded by another incarnation")
	// ErrDuplicateSender stops a node that sees, under its own account,
	// instance and incarnation, a command it did not send: two processes
	// were given one incarnation and would ack each other's commands.
	ErrDuplicateSender = errors.New("node: another process sends with this account, instance and incarnation")
	// ErrRewind: the rewind from a replayer failed before the node
	// reached the live stream (refused, connection lost, corrupt store);
	// the message names the replayer and why.
	ErrRewind = errors.New("node: rewind failed")
	// ErrNotFromStream: a send on a hot-hot account outside a handler
	// call for a stream message (a local timer, another goroutine,
	// outside input). Its partner instance would not send it, so a switch
	// could lose or double it: route that input through the stream (a
	// gateway node sends it as a command; the hot-hot handler reacts to
	// that message). See docs/node.md.
	ErrNotFromStream = errors.New("node: hot-hot send not in reaction to a stream message: route that input through the stream (a gateway node's command) so that every instance sends it alike")
	// ErrHotHotTimer: centralized timers name an instance, so a hot-hot
	// account cannot set them (its partner's would differ).
	ErrHotHotTimer = errors.New("node: centralized timers are not available to a hot-hot account")
	// ErrHotHotBacklog stops a hot-hot instance whose sends not yet in
	// the stream exceed HotHotBacklog (its partner, or the sequencer,
	// fell that far behind).
	ErrHotHotBacklog = errors.New("node: hot-hot backlog full")
	// ErrTooManySends: one handler call of a hot-hot instance sent more
	// than 65535 commands (ids hold the index of a send in 16 bits).
	ErrTooManySends = errors.New("node: more than 65535 sends in one handler call of a hot-hot instance")
)

// RejectedError is the error of one command the sequencer refused (an
// InternalRejected record): errors.Is(err, ErrRejected) holds, and Reason
// says why.
type RejectedError struct {
	CmdSeq uint64
	Reason wire.RejectReason
}

func (e *RejectedError) Error() string {
	return ErrRejected.Error() + ": command " + strconv.FormatUint(e.CmdSeq, 10) + ": " + e.Reason.String()
}

func (e *RejectedError) Unwrap() error { return ErrRejected }
