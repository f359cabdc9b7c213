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
