package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ErrConfig is the sentinel of a bad format or level.
var ErrConfig = errors.New("logging: invalid configuration")

// Formats and Levels are the accepted values of --log-format and
// --log-level.
var (
	Formats = []string{"text", "json"}
	Levels  = []string{"debug", "info", "warn", "error"}
)

// ParseLevel reads a level name (debug, info, warn, error).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: level %q, want one of: %s", ErrConfig, s, strings.Join(Levels, ", "))
}

// New is a process's logger: format "text" (logfmt, slog's TextHandler)
// or "json" (one object a line) on w, records below level dropped.
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: format %q, want one of: %s", ErrConfig, format, strings.Join(Formats, ", "))
}
