package logging

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// StdLog is a *log.Logger (for libraries that take one, as
// hashicorp/memberlist does) whose lines go to l at the level of their
// prefix: "[DEBUG]" and "[TRACE]" debug, "[INFO]" info, "[WARN]" warn,
// "[ERR]"/"[ERROR]" error, none info. The prefix is cut from the
// message; name, when not empty, is added as the attribute "lib". Lines
// pass lim first, keyed by level and the message without its digits
// (counts, times and addresses differ; the same failure is one key),
// unless lim is nil.
func StdLog(l *slog.Logger, name string, lim *Limiter) *log.Logger {
	return log.New(&stdWriter{l: l, name: name, lim: lim}, "", 0)
}

type stdWriter struct {
	l    *slog.Logger
	name string
	lim  *Limiter
}

var stdLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[TRACE]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

// StdLevel is the level of a std-log line and the line without its
// prefix.
func StdLevel(line string) (slog.Level, string) {
	line = strings.TrimSpace(line)
	for _, p := range stdLevels {
		if rest, ok := strings.CutPrefix(line, p.prefix); ok {
			return p.level, strings.TrimSpace(rest)
		}
	}
	return slog.LevelInfo, line
}

func (w *stdWriter) Write(p []byte) (int, error) {
	level, msg := StdLevel(string(p))
	if !w.l.Enabled(context.Background(), level) {
		return len(p), nil
	}
	var args []any
	if w.lim != nil {
		ok, n := w.lim.Allow(level.String() + " " + stripDigits(msg))
		if !ok {
			return len(p), nil
		}
		if n > 0 {
			args = append(args, "suppressed", n)
		}
	}
	if w.name != "" {
		args = append(args, "lib", w.name)
	}
	w.l.Log(context.Background(), level, msg, args...)
	return len(p), nil
}

// stripDigits is s without its digits: the key of a repeated message
// whose counts and times differ.
func stripDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, s)
}
