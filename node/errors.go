package node

import (
	"errors"
	"strconv"

	"github.com/seqd/seqd/wire"
)

// Sentinel errors. Fatal ones (ErrUnrecoverable, ErrDiverged,
// ErrSuperseded, ErrDuplicateSender) are wrapped with detail and become
// sticky in Core.Err; test them with errors.Is.
var (
	ErrWindowFull    = errors.New("node: send window full")
	ErrReadOnly      = errors.New("node: read-only node cannot send")
	ErrTooLarge      = errors.New("node: payload larger than MaxMessageBytes")
	ErrUnrecoverable = errors.New("node: unrecoverable gap")
	ErrDiverged      = errors.New("node: diverged: a new epoch cut messages this node already delivered")
	ErrFrameKind     = errors.New("node: frame kind not expected by a node")
	ErrNewSession    = errors.New("node: a newer session is on the stream")
	ErrConfig        = errors.New("node: invalid config")
	ErrClosed        = errors.New("node: closed")
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
