// Package config holds the one error type every Validate method in seqd
// returns, so that a caller (the seqd command, a test, an embedding
// application) can tell which field is wrong with errors.As instead of
// searching the message.
//
// It is a leaf package (standard library only) so that every package,
// wire-level or command-level, can import it without an import pointing
// outward; each package keeps its own ErrConfig sentinel, which the
// error wraps for errors.Is.
package config

import "fmt"

// Error is a configuration value outside what is allowed.
type Error struct {
	// Field names the bad setting: a Go field of a package's Config
	// ("HeartbeatInterval"), or a configuration key ("node.mode") when
	// the seqd command reports it.
	Field string
	// Value is the value given, as text ("0s", "\"turbo\"").
	Value string
	// Allowed says what would be accepted ("1µs..1m", "one of: safe, fast").
	Allowed string
	// Err is the reporting package's sentinel (node.ErrConfig, ...), or
	// nil; errors.Is sees it.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: %s = %s, want %s", e.Err, e.Field, e.Value, e.Allowed)
	}
	return fmt.Sprintf("%s = %s, want %s", e.Field, e.Value, e.Allowed)
}

// Unwrap returns the package's sentinel.
func (e *Error) Unwrap() error { return e.Err }

// New is a shorthand: value is printed with %v (%q for a string).
func New(sentinel error, field string, value any, allowed string) *Error {
	v := fmt.Sprint(value)
	if s, ok := value.(string); ok {
		v = fmt.Sprintf("%q", s)
	}
	return &Error{Field: field, Value: v, Allowed: allowed, Err: sentinel}
}
