package cluster

import (
	"fmt"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// A Standby driven step by step, for a shell that owns the transport and
// the clock itself (the deterministic simulator, test/sim): it polls the
// client and hands each frame to Step, then calls Work once per turn,
// where Run would loop. Fsyncs run inline in Work instead of on a
// goroutine. Step, Work and Run must not be mixed on one Standby.

// Step takes one stream frame, as Run does for each frame it polls.
func (s *Standby) Step(f []byte, from transport.Peer) { s.frame(f, from) }

// Work does one turn of Run's loop: the receiver's timers (NAKs), what
// its Ready asks, the store's tick, an fsync when due (inline), and the
// ack. It returns the error that stopped the standby for good, or
// ErrTakenOver after a Takeover.
func (s *Standby) Work() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.running:
		return fmt.Errorf("%w: Run is driving it", ErrConfig)
	case s.taken:
		return ErrTakenOver
	case s.err != nil:
		return s.err
	}
	if err := s.restartReceiverLocked(); err != nil {
		s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
		return s.err
	}
	now := s.clock()
	s.r.Tick(now)
	s.handleReadyLocked(now)
	if err := s.store.Tick(now); err != nil {
		s.failLocked(fmt.Errorf("cluster: standby %d: store: %w", s.cfg.Member, err))
	}
	if s.err == nil && s.store.SyncDue() {
		if req, ok := s.store.StartSync(); ok {
			s.dirty = false
			if err := s.store.FinishSync(req, req.Run()); err != nil {
				s.failLocked(fmt.Errorf("cluster: standby %d: %w", s.cfg.Member, err))
			}
			s.stats.Fsyncs++
		}
	}
	s.ackLocked(now)
	return s.err
}

// restartReceiverLocked: when CatchUp filled the store before the
// receiver saw its first frame, the receiver repairs from the store's new
// end instead of the old one.
func (s *Standby) restartReceiverLocked() error {
	if s.r.Started() || s.rcfg.RewindFrom == s.store.Contiguous()+1 {
		return nil
	}
	s.rcfg.RewindFrom = s.store.Contiguous() + 1
	r, err := receiver.New(s.rcfg)
	if err != nil {
		return err
	}
	s.r = r
	return nil
}

// CatchUpFrom is CatchUp from sources in the same process (another
// member's Standby, read under its lock) instead of fetch servers: it
// appends what the store lacks up to cut, and nothing above it.
func (s *Standby) CatchUpFrom(cut uint64, srcs ...FetchSource) error {
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
			buf, next, done, _, err = src.FetchRange(buf[:0], have+1, cut, fetchChunkBytes)
			if err != nil {
				break // try the next source
			}
			for b := buf; len(b) >= wire.PeerFrameHeaderBytes; {
				kind, n, err := wire.DecodePeerFrameHeader(b[:wire.PeerFrameHeaderBytes])
				if err != nil || kind != wire.PeerPacket || len(b) < wire.PeerFrameHeaderBytes+n {
					return fmt.Errorf("%w: a source's range does not decode: %v", ErrCatchUp, err)
				}
				if err := s.fetched(b[wire.PeerFrameHeaderBytes:wire.PeerFrameHeaderBytes+n], cut); err != nil {
					return err
				}
				b = b[wire.PeerFrameHeaderBytes+n:]
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
