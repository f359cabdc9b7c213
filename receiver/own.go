package receiver

import "github.com/seqd/seqd/wire"

// A node's view of its own commands in the stream before it delivers
// them. A node acks its commands when it delivers them; in safe mode that
// is when stable covers them, which behind a sequencer group under load
// can be tens of milliseconds after they were taken, longer than the
// node's resend timeout: `seqd bench --sequencers 3` resent about one
// command in a hundred, each one a duplicate the sequencer dropped. The
// receiver already walks every record it takes, so it notes the newest
// command of its own identity it took but did not deliver: the node
// knows then that the commands up to it are in the stream, and their
// resend timers wait until it delivers up to there (node/send.go).

// ownSeen is the newest record of this receiver's own Account and
// Instance taken but not delivered: its cmdSeq, its seq and its epoch.
type ownSeen struct {
	cmdSeq, seq uint64
	epoch       uint32
}

// sawOwn notes rec, taken into the hold or the ring (of epoch), when it
// is one of this receiver's own commands.
func (r *Receiver) sawOwn(rec *wire.Record, epoch uint32) {
	if rec.Account != r.cfg.Account || rec.Instance != r.cfg.Instance || r.cfg.Account == 0 ||
		rec.Flags&wire.FlagInternal != 0 || rec.Seq < r.next || rec.Seq <= r.own.seq && epoch == r.own.epoch {
		return
	}
	r.own = ownSeen{cmdSeq: rec.CmdSeq, seq: rec.Seq, epoch: epoch}
}

// OwnSeen reports the newest command of the receiver's own Account and
// Instance (Config) that it took but had not delivered when it took it:
// its cmdSeq, the seq it holds and that seq's epoch; ok is false when
// there was none. Every command of this sender up to cmdSeq lies in the
// stream at or below seq (a sequencer takes a sender's commands in
// cmdSeq order), unless a new epoch cut it: compare epoch with Epoch.
func (r *Receiver) OwnSeen() (cmdSeq, seq uint64, epoch uint32, ok bool) {
	return r.own.cmdSeq, r.own.seq, r.own.epoch, r.own.seq != 0
}
