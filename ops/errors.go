package ops

import "errors"

// Sentinel errors of the admin API. The admin endpoint answers each with
// its own HTTP status, and the client turns that status back into the
// sentinel (errors.Is works across the wire); cluster's errors of the
// same names are these.
var (
	// ErrNotPrimary: the request needs the primary (the Raft leader), and
	// the member asked is not it; the error names the leader when known.
	ErrNotPrimary = errors.New("ops: not primary")
	// ErrUnknownMember: a transfer or removal names no member.
	ErrUnknownMember = errors.New("ops: unknown member")
	// ErrTooFewVoters: a removal would leave fewer than three voters
	// (add the replacement first).
	ErrTooFewVoters = errors.New("ops: too few voters")
)

// Errors of the admin command language.
var (
	// ErrSyntax: a command line that does not parse (an unterminated
	// quote, a control character).
	ErrSyntax = errors.New("ops: syntax error")
	// ErrUnknownCommand: the first word names no command or node here.
	ErrUnknownCommand = errors.New("ops: unknown command")
	// ErrBadArgs: a command's arguments are wrong (the text says how).
	ErrBadArgs = errors.New("ops: bad arguments")
	// ErrNotSupported: the process knows the command and cannot do it
	// (yet): activate and force-passive before hot-hot lands.
	ErrNotSupported = errors.New("ops: not supported")
	// ErrBadCommand, ErrDuplicateCommand: a command or node registered
	// with a bad or taken name.
	ErrBadCommand       = errors.New("ops: bad command name")
	ErrDuplicateCommand = errors.New("ops: duplicate command")
	// ErrUnauthorized: a caller off loopback without the right token.
	ErrUnauthorized = errors.New("ops: unauthorized")
	// ErrForbidden: a read-only caller asked for a command that changes
	// something (Auth.ReadToken).
	ErrForbidden = errors.New("ops: forbidden: read-only caller")
	// ErrNotReady: the process is not ready (readiness, wait-ready).
	ErrNotReady = errors.New("ops: not ready")
)

// ErrAlreadyPrimary: a transfer names the member that is primary now.
var ErrAlreadyPrimary = errors.New("ops: already primary")

// Errors of the admin client.
var (
	// ErrUnreachable: the admin address did not answer (refused, timed
	// out, unknown host); the text says which.
	ErrUnreachable = errors.New("ops: unreachable")
	// ErrBadAddr: an admin address that is no host:port.
	ErrBadAddr = errors.New("ops: bad admin address")
	// ErrNotMember: a member's status asked of another kind of process.
	ErrNotMember = errors.New("ops: not a cluster member")
)
