package mem

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/transport/fault"
)

// Config shapes a Network.
type Config struct {
	// Faults are applied per link direction (server->client i and client
	// i->server each have their own Injector); Faults.Seed also seeds the
	// delays.
	Faults fault.Config
	// MinDelay and MaxDelay bound the per-frame delivery delay, in virtual
	// time, drawn uniformly per frame. Both 0: frames are deliverable at once.
	MinDelay, MaxDelay time.Duration
	// QueueFrames is each endpoint's inbox capacity; a frame that arrives at
	// a full inbox is dropped and counted. 0 means DefaultQueueFrames.
	QueueFrames int
	// MaxFrameBytes is the largest frame the network carries; larger ones
	// are refused with transport.ErrFrameTooLarge. 0 means
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
}

// Defaults and limits of Config.
const (
	DefaultQueueFrames   = 65536
	DefaultMaxFrameBytes = 1 << 16
	maxQueueFrames       = 1 << 24
	maxMaxFrameBytes     = 1 << 24
)

// DefaultConfig is a lossless network with no delay.
func DefaultConfig() Config {
	return Config{QueueFrames: DefaultQueueFrames, MaxFrameBytes: DefaultMaxFrameBytes}
}

// Validate reports the first field out of its allowed range.
func (c Config) Validate() error {
	if err := c.Faults.Validate(); err != nil {
		return fmt.Errorf("%w: Faults: %w", ErrConfig, err)
	}
	if c.MinDelay < 0 {
		return fmt.Errorf("%w: MinDelay=%v, want >= 0", ErrConfig, c.MinDelay)
	}
	if c.MaxDelay < c.MinDelay {
		return fmt.Errorf("%w: MaxDelay=%v, want >= MinDelay (%v)", ErrConfig, c.MaxDelay, c.MinDelay)
	}
	if c.QueueFrames < 0 || c.QueueFrames > maxQueueFrames {
		return fmt.Errorf("%w: QueueFrames=%d, want 0 (default) or 1..%d", ErrConfig, c.QueueFrames, maxQueueFrames)
	}
	if c.MaxFrameBytes < 0 || c.MaxFrameBytes > maxMaxFrameBytes {
		return fmt.Errorf("%w: MaxFrameBytes=%d, want 0 (default) or 1..%d", ErrConfig, c.MaxFrameBytes, maxMaxFrameBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.QueueFrames == 0 {
		c.QueueFrames = DefaultQueueFrames
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	return c
}
