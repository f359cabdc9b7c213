package replayer

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/internal/vfs"
)

// SyncPolicy says when appended bytes are made durable with fsync.
type SyncPolicy uint8

const (
	// SyncInterval (the default) fsyncs when Config.SyncInterval has passed
	// since the last fsync (checked by Tick) or Config.SyncBytes were
	// appended since (checked by Append), whichever comes first.
	SyncInterval SyncPolicy = iota
	// SyncNone never fsyncs on its own (only Sync and Close do): bytes reach
	// the operating system at every Tick and when the write buffer fills,
	// so they survive the process being killed but not the machine.
	SyncNone
	// SyncAlways fsyncs after every Append.
	SyncAlways
)

// String is the name used in configuration files.
func (p SyncPolicy) String() string {
	switch p {
	case SyncInterval:
		return "interval"
	case SyncNone:
		return "none"
	case SyncAlways:
		return "always"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// ParseSyncPolicy reads a policy name as written in configuration files.
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "interval", "":
		return SyncInterval, nil
	case "none":
		return SyncNone, nil
	case "always":
		return SyncAlways, nil
	}
	return 0, fmt.Errorf("%w: fsync policy %q (want none, interval or always)", ErrConfig, s)
}

// Config tunes a Store. Start from DefaultConfig.
type Config struct {
	// Session is the session the store holds. 0 takes it from the segments
	// already in the directory, or else from the first packet appended.
	Session uint64
	// ReadOnly opens an existing store (an archive) without changing it: a
	// torn tail is reported but not cut, and Append fails.
	ReadOnly bool
	// Sync is the fsync policy; SyncInterval and SyncBytes tune
	// SyncInterval.
	Sync         SyncPolicy
	SyncInterval time.Duration
	SyncBytes    int64
	// SyncInShell (with SyncInterval): Append and Tick never fsync; the
	// shell asks SyncDue and runs the fsync on a goroutine of its own
	// (StartSync, SyncRequest.Run, FinishSync), so appends never wait for
	// the disk. Rolling a segment leaves the fsyncs of the one it seals
	// and of the directory to the shell's next request too.
	SyncInShell bool
	// SegmentBytes: a segment is rolled when the next frame would take it
	// past this size (a segment holds at least one frame).
	SegmentBytes int64
	// MaxPacketBytes bounds an appended packet (and so the buffers below).
	MaxPacketBytes int
	// WriteBufferBytes: appended frames collect here and reach the file
	// in one write when it fills, at Tick, Sync and Range.
	WriteBufferBytes int
	// ReadBufferBytes: Range reads a segment in chunks of this size.
	ReadBufferBytes int
	// IndexIntervalBytes: the in-memory index by seq holds one entry per
	// this many bytes of a segment, so Range reads at most about this much
	// before the first packet it serves.
	IndexIntervalBytes int
	// FS is the file system the segment files live on; nil is the
	// operating system's (vfs.Default). Tests and the simulator run the
	// store on a vfs.MemFS, or behind an errorfs.
	FS vfs.FS
}

// fs is the file system to use.
func (c Config) fs() vfs.FS {
	if c.FS == nil {
		return vfs.Default
	}
	return c.FS
}

// DefaultConfig is the fsync `interval` policy at 1 ms or 1 MiB, 128 MiB
// segments and packets of up to 64 KiB.
func DefaultConfig() Config {
	return Config{
		Sync:               SyncInterval,
		SyncInterval:       time.Millisecond,
		SyncBytes:          1 << 20,
		SegmentBytes:       128 << 20,
		MaxPacketBytes:     64 << 10,
		WriteBufferBytes:   256 << 10,
		ReadBufferBytes:    256 << 10,
		IndexIntervalBytes: 4 << 10,
	}
}

// Validate names the first field out of range and the range allowed.
func (c Config) Validate() error {
	switch {
	case c.Sync > SyncAlways:
		return fmt.Errorf("%w: Sync = %d, want SyncInterval, SyncNone or SyncAlways", ErrConfig, c.Sync)
	case c.Sync == SyncInterval && c.SyncInterval <= 0:
		return fmt.Errorf("%w: SyncInterval = %v, want > 0", ErrConfig, c.SyncInterval)
	case c.Sync == SyncInterval && c.SyncBytes <= 0:
		return fmt.Errorf("%w: SyncBytes = %d, want > 0", ErrConfig, c.SyncBytes)
	case c.MaxPacketBytes < 128 || c.MaxPacketBytes > MaxFramePacketBytes:
		return fmt.Errorf("%w: MaxPacketBytes = %d, want 128..%d", ErrConfig, c.MaxPacketBytes, MaxFramePacketBytes)
	case c.SegmentBytes < SegmentHeaderBytes+FrameHeaderBytes+int64(c.MaxPacketBytes) || c.SegmentBytes > 1<<40:
		return fmt.Errorf("%w: SegmentBytes = %d, want %d..%d (a header and a largest frame fit)", ErrConfig,
			c.SegmentBytes, SegmentHeaderBytes+FrameHeaderBytes+int64(c.MaxPacketBytes), int64(1)<<40)
	case c.WriteBufferBytes < FrameHeaderBytes+c.MaxPacketBytes || c.WriteBufferBytes > 1<<30:
		return fmt.Errorf("%w: WriteBufferBytes = %d, want %d..%d (a largest frame fits)", ErrConfig,
			c.WriteBufferBytes, FrameHeaderBytes+c.MaxPacketBytes, 1<<30)
	case c.ReadBufferBytes < FrameHeaderBytes+c.MaxPacketBytes || c.ReadBufferBytes > 1<<30:
		return fmt.Errorf("%w: ReadBufferBytes = %d, want %d..%d (a largest frame fits)", ErrConfig,
			c.ReadBufferBytes, FrameHeaderBytes+c.MaxPacketBytes, 1<<30)
	case c.IndexIntervalBytes < 512 || int64(c.IndexIntervalBytes) > c.SegmentBytes:
		return fmt.Errorf("%w: IndexIntervalBytes = %d, want 512..SegmentBytes", ErrConfig, c.IndexIntervalBytes)
	}
	return nil
}
