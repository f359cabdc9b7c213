package archiver

import (
	"strings"
	"time"

	"github.com/seqd/seqd/internal/config"
)

// Config says what to ship where.
type Config struct {
	// Source is a session directory (a replayer's --dir) or a directory
	// of them (one per session).
	Source string
	// Dest is the destination: a directory (a mounted object store or
	// network share is one), or file:///path. Each session goes to
	// Dest/SESSION (the session id in hex) with a MANIFEST.json and a
	// SHA256SUMS file.
	Dest string
	// Settle is how long a session's files must stay unchanged before
	// the session counts as finished (its replayer moved on or stopped).
	Settle time.Duration
	// Interval is how often Run looks for finished sessions.
	Interval time.Duration
	// Reverify makes every scan read each shipped session and its copy
	// again (and ship a damaged copy again); without it a scan skips a
	// session whose files did not change since its manifest was written.
	Reverify bool
}

// DefaultConfig waits 5 minutes of quiet and looks each minute.
func DefaultConfig() Config {
	return Config{Settle: 5 * time.Minute, Interval: time.Minute}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Source == "":
		return config.New(ErrConfig, "Source", "", "a session directory or a directory of them")
	case c.Dest == "":
		return config.New(ErrConfig, "Dest", "", "a directory or file:///path")
	case strings.Contains(c.Dest, "://") && !strings.HasPrefix(c.Dest, "file://"):
		return config.New(ErrConfig, "Dest", c.Dest, "a directory or file:///path; mount an object store to ship to it")
	case c.Settle < 0:
		return config.New(ErrConfig, "Settle", c.Settle, ">= 0")
	case c.Interval < 10*time.Millisecond:
		return config.New(ErrConfig, "Interval", c.Interval, ">= 10ms")
	}
	return nil
}

// destDir is Dest as a directory path.
func (c Config) destDir() string { return strings.TrimPrefix(c.Dest, "file://") }
