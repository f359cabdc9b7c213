package replayer

import (
	"fmt"
	"net"
	"time"
)

// SendRange is the one loop that streams a range of stored packets to a
// connection, for both protocols that serve them: a rewind (RewindServer,
// from a Reader of the store's Tip, lock-free) and a peer fetch
// (cluster.PeerServer, from a standby's store under the standby's lock).
// The two read the store differently and frame what they send
// differently, so each is a RangeSource; what they share lives here:
// writing each chunk whole within a deadline, stopping at the source's
// last (end or error) frame, and, for a source that follows the store's
// tip, waiting for new frames with a backoff while nothing comes.

// A RangeSource is a range of stored packets framed as its protocol frames
// them, read in chunks (each bounded by the source: a buffer, a byte
// budget per turn of a lock).
type RangeSource interface {
	// Next returns the next frames to write, valid until the next call,
	// and whether they are the last: the protocol's end or error frame is
	// at their end. Nothing and not last: the source is at the store's
	// tip and follows it (SendRange waits, then asks again). failure, if
	// not nil, is why the stream ended early (its error or end frame is
	// in frames): the caller's to log, SendRange sends it first.
	Next() (frames []byte, last bool, failure error)
}

// RangeSendConfig tunes SendRange for one protocol.
type RangeSendConfig struct {
	// WriteTimeout bounds each write of a chunk.
	WriteTimeout time.Duration
	// TipPoll is the first wait at the tip for a source that follows it,
	// doubling while nothing comes up to TipPollMax and reset when frames
	// come; 0: the source never waits (nothing and not last is
	// ErrRangeStalled).
	TipPoll, TipPollMax time.Duration
	// Wake, if not nil, signals that the source may have new frames (the
	// store's tip moved: Tip.Wake): a follower at the tip then sends them
	// at once instead of at its next poll, which stays as a fallback.
	Wake <-chan struct{}
	// Gone is closed when the client left, Quit when the server closes:
	// either ends the stream (nil: never). Gone is also looked at after
	// every chunk.
	Gone, Quit <-chan struct{}
	// Sent, if not nil, counts the bytes written.
	Sent func(n int)
}

// SendRange writes src's chunks to c until the last one was written (then
// it returns src's failure, nil for a range served whole), a write fails
// (the write's error), or Gone or Quit ends it (nil).
func SendRange(c net.Conn, src RangeSource, cfg RangeSendConfig) error {
	var poll *time.Timer
	wait := cfg.TipPoll
	for {
		frames, last, failure := src.Next()
		if len(frames) > 0 {
			wait = cfg.TipPoll
			if err := writeRange(c, frames, &cfg); err != nil {
				if failure != nil {
					return failure
				}
				return err
			}
		}
		if last {
			return failure
		}
		if len(frames) == 0 {
			if cfg.TipPoll == 0 {
				return ErrRangeStalled
			}
			if poll == nil {
				poll = time.NewTimer(wait)
				defer poll.Stop()
			} else {
				poll.Reset(wait)
			}
			wait = min(2*wait, cfg.TipPollMax)
			select {
			case <-cfg.Gone:
				return nil
			case <-cfg.Quit:
				return nil
			case <-cfg.Wake:
				wait = cfg.TipPoll
			case <-poll.C:
			}
		}
		select {
		case <-cfg.Gone:
			return nil
		default:
		}
	}
}

// writeRange sends b whole within the write timeout.
func writeRange(c net.Conn, b []byte, cfg *RangeSendConfig) error {
	_ = c.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
	n, err := c.Write(b)
	if cfg.Sent != nil {
		cfg.Sent(n)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
