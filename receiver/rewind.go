package receiver

import "github.com/seqd/seqd/wire"

// StepRewind feeds one packet of a rewind: a replayer's stored stream,
// in seq order from where this receiver delivers (Config.RewindFrom),
// sent over a rewind connection (docs/protocol.md, "Rewind"). It is a
// repair, never evidence of the live stream: it does not start the
// receiver (a live packet fixes the session, the epoch and FirstLive
// first; before that StepRewind returns ErrNotStarted and the caller
// keeps the packet), it does not count as hearing the sequencer, and a
// packet of another session is fenced. Dedupe, order, reassembly and
// epoch fencing are those of Step, with one difference: the stored
// stream holds only records the stream kept (a replayer persists what
// it delivered, never what a failover cut), so a record of an older epoch
// whose successor's start is not yet known (the rewind has not reached
// it) is accepted up to the next epoch start known, instead of only up to
// its packet's stable.
//
// Live packets keep coming through Step meanwhile: those beyond the
// receive ring are dropped (Overflow) and come from the rewind later.
// While SetRewinding(true), gaps are not NAKed: the rewind fills them.
func (r *Receiver) StepRewind(now int64, frame []byte) error {
	if r.err != nil {
		return r.err
	}
	r.stepped = false
	if err := wire.DecodePacket(frame, &r.pkt); err != nil {
		r.stats.Malformed++
		return err
	}
	if r.pkt.Kind != wire.KindData {
		r.stats.Malformed++
		return ErrFrameKind
	}
	if !r.started {
		return ErrNotStarted
	}
	if r.pkt.Session != r.session {
		r.stats.Fenced++
		return nil
	}
	r.stats.Rewound++
	r.rewindPkt = true
	heard := r.heard
	r.onPacket(now, frame)
	r.heard = heard
	r.rewindPkt = false
	return r.err
}

// SetRewinding tells the receiver whether a rewind stream is open: while
// it is, open gaps are not NAKed (the rewind brings every seq in order;
// NAKing them would make the sequencer resend, or answer Gone for, what
// the replayer is sending anyway), and Status frames carry
// StatusReadOnly, so the sequencer's flow control does not hold the
// stream back for a receiver that is behind by design. Turned off, gaps
// still open are NAKed and status is reported as usual.
func (r *Receiver) SetRewinding(on bool) { r.rewinding = on }

// Rewinding reports what SetRewinding said last.
func (r *Receiver) Rewinding() bool { return r.rewinding }
