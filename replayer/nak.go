package replayer

import (
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// naks answers the NAKs that reach a replayer from its Store, with the
// sequencer's policy (sequencer.Repairer: per-NAK cap, bandwidth cap,
// multicast answers, Gone). It is pure: the shell hands it frames from
// its NAK endpoint and the monotonic time.
//
// What differs from the primary, and why:
//
//   - Stable: packets go out with the stable header they were stored with
//     (Answer.Stamp off). Only the current epoch's primary may advance a
//     receiver's stable; a stored header carries a stable the primary
//     set, so a replayer's answer never claims more than the primary did.
//   - Not held yet: a NAK from beyond the highest seq held whole (the
//     replayer is behind the stream, or repairing its own hole) gets no
//     answer, like a NAK past the primary's tail: the receiver asks again,
//     and is answered once the replayer holds it.
//   - Gone: a NAK below the oldest seq held, or to an empty store, gets
//     Gone, so the receiver moves to its next source. It carries the
//     NAK's own epoch: a replayer has no say over epochs, and what it
//     holds does not depend on one; a Gone in another epoch than the
//     receiver's would be ignored and the receiver would ask forever.
type naks struct {
	rep    *sequencer.Repairer
	nak    wire.Nak
	answer sequencer.Answer
	stats  NakStats
}

// NakStats count the frames of a replayer's NAK endpoint.
type NakStats struct {
	Naks         uint64 // NAKs of this session
	NotHeld      uint64 // NAKs from beyond the highest seq held (not answered)
	WrongSession uint64 // NAKs of another session (ignored)
	Malformed    uint64 // frames that are not NAKs or do not decode
	sequencer.RepairStats
}

func (x *naks) init(cfg sequencer.RepairConfig, sink sequencer.Sink) {
	x.rep = sequencer.NewRepairer(cfg, sink)
}

// step handles one frame from the NAK endpoint.
func (x *naks) step(mono int64, frame []byte, from transport.Peer, s *Store) {
	if k, err := wire.PeekKind(frame); err != nil || k != wire.KindNak {
		x.stats.Malformed++
		return
	}
	n := &x.nak
	if err := wire.DecodeNak(frame, n); err != nil {
		x.stats.Malformed++
		return
	}
	if s.Session() != 0 && n.Session != s.Session() {
		x.stats.WrongSession++
		return
	}
	x.stats.Naks++
	a := &x.answer
	*a = sequencer.Answer{Store: s, ToSeq: n.ToSeq, Epoch: n.Epoch, Session: n.Session}
	if _, ok := s.Oldest(); ok {
		c := s.Contiguous()
		if n.FromSeq > c {
			x.stats.NotHeld++
			return
		}
		a.ToSeq = min(a.ToSeq, c)
	}
	x.rep.Answer(mono, n, from, a)
	a.Store = nil
}

// Stats returns the counters.
func (x *naks) Stats() NakStats {
	st := x.stats
	st.RepairStats = x.rep.Stats()
	return st
}
