package logger

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/config"
)

// Format is how a message is written.
type Format string

const (
	// Text is one line per message for people: the sequencer's time as
	// an RFC 3339 timestamp (UTC), seq, epoch, sender, command seq and
	// the payload quoted (printable ASCII, Go escapes for the rest).
	Text Format = "text"
	// JSON is one object per line (JSON Lines) with seqd tail's keys and
	// the payload ("payload" as a string when it is UTF-8, else
	// "payload_hex").
	JSON Format = "json"
)

// Config says where the log goes and when a file is rotated.
type Config struct {
	// Dir holds the files, PREFIX-YYYY-MM-DD.NNN.log (text) or .jsonl.
	Dir string
	// Prefix begins each file's name.
	Prefix string
	Format Format
	// MaxFileBytes rotates to the next file before one would grow past
	// it (0: no size limit). A line longer than it gets a file alone.
	MaxFileBytes int64
	// Daily starts a new file when the day (UTC) of the sequencer's time
	// changes: the files of a replay split where the live ones did.
	Daily bool
	// Keep is how many files to keep (the oldest are removed on
	// rotation); 0 keeps every one.
	Keep int
	// Internal also logs internal (sequencer-generated) messages.
	Internal bool
	// MaxPayloadBytes bounds the payload bytes shown per message (the
	// size is always shown); 0 shows none.
	MaxPayloadBytes int
	// FlushInterval is how often buffered lines reach the file.
	FlushInterval time.Duration
}

// DefaultConfig rotates daily and at 64 MiB, text, and keeps every file.
func DefaultConfig() Config {
	return Config{Prefix: "seqd", Format: Text, MaxFileBytes: 64 << 20, Daily: true, Internal: true,
		MaxPayloadBytes: 256, FlushInterval: 200 * time.Millisecond}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return config.New(ErrConfig, "Dir", "", "the log directory")
	case c.Prefix == "" || strings.ContainsAny(c.Prefix, `/\`) || c.Prefix != filepath.Base(c.Prefix):
		return config.New(ErrConfig, "Prefix", c.Prefix, "a file name without a separator")
	case c.Format != Text && c.Format != JSON:
		return config.New(ErrConfig, "Format", string(c.Format), "text or json")
	case c.MaxFileBytes < 0:
		return config.New(ErrConfig, "MaxFileBytes", c.MaxFileBytes, ">= 0; 0: no limit")
	case c.MaxFileBytes > 0 && c.MaxFileBytes < 4096:
		return config.New(ErrConfig, "MaxFileBytes", c.MaxFileBytes, "0 or at least 4096")
	case c.Keep < 0:
		return config.New(ErrConfig, "Keep", c.Keep, ">= 0; 0: every file")
	case c.MaxPayloadBytes < 0 || c.MaxPayloadBytes > 1<<20:
		return config.New(ErrConfig, "MaxPayloadBytes", c.MaxPayloadBytes, "0..1048576")
	case c.FlushInterval < time.Millisecond || c.FlushInterval > time.Minute:
		return config.New(ErrConfig, "FlushInterval", c.FlushInterval, "1ms..1m")
	}
	return nil
}

func (c Config) ext() string {
	if c.Format == JSON {
		return ".jsonl"
	}
	return ".log"
}
