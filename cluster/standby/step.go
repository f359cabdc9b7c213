package standby

import (
	"fmt"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// An Agent driven step by step, for a shell that owns the transport and
// the clock itself (the deterministic simulator, test/sim): it polls the
// client and hands each frame to Step, then calls Work once per turn,
// where Run would loop. Fsyncs run inline in Work instead of on a
// goroutine. Step, Work and Run must not be mixed on one Agent.

// Step takes one stream frame, as Run does for each frame it polls.
func (s *Agent) Step(f []byte, from transport.Peer) { s.frame(f, from) }

// Work does one turn of Run's loop: the Core's timers (NAKs) and
// output, the store's tick, an fsync when due (inline), and the ack. It
// returns the error that stopped the standby for good, or ErrTakenOver
// after a Takeover.
func (s *Agent) Work() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.core
	switch {
	case s.running:
		return fmt.Errorf("%w: Run is driving it", ErrConfig)
	case c.taken:
		return ErrTakenOver
	case c.err != nil:
		return c.err
	}
	if err := c.Rebase(); err != nil {
		c.fail(fmt.Errorf("standby: member %d: %w", s.cfg.Member, err))
		return c.err
	}
	now := s.clock()
	c.Tick(now)
	if req, ok := c.StartSync(); ok {
		c.FinishSync(req, req.Run())
	}
	c.Ack(now)
	s.sendLocked()
	s.publishLocked()
	return c.err
}

// catchUpChunkBytes is how much CatchUpFrom copies out of a source per
// turn of its lock, so the source's stream loop waits little.
const catchUpChunkBytes = 1 << 20

// CatchUpFrom is CatchUp from sources in the same process (another
// member's Agent, read under its lock) instead of fetch servers: it
// appends what the store lacks up to cut, and nothing above it.
func (s *Agent) CatchUpFrom(cut uint64, srcs ...Source) error {
	var buf []byte
	for _, src := range srcs {
		for {
			have := s.Contiguous()
			if have >= cut {
				return nil
			}
			var (
				next uint64
				done bool
				err  error
			)
			buf, next, done, _, err = src.FetchRange(buf[:0], have+1, cut, catchUpChunkBytes)
			if err != nil {
				break // try the next source
			}
			const hb = wire.PeerFrameHeaderBytes
			for b := buf; len(b) >= hb; {
				kind, n, err := wire.DecodePeerFrameHeader(b[:hb])
				if err != nil || kind != wire.PeerPacket || n > replayer.MaxFramePacketBytes || len(b) < hb+n {
					return fmt.Errorf("%w: a source's range does not decode: %v", ErrCatchUp, err)
				}
				if err := s.fetched(b[hb:hb+n], cut); err != nil {
					return err
				}
				b = b[hb+n:]
			}
			if done || next <= have+1 && s.Contiguous() == have {
				break
			}
		}
	}
	if have := s.Contiguous(); have < cut {
		return fmt.Errorf("%w: holds up to %d, cut %d, from %d sources", ErrCatchUp, have, cut, len(srcs))
	}
	return nil
}
