package cluster

import (
	"slices"
	"sync/atomic"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// QuorumAcks is the Member's Acks for one epoch: it picks the standby acks
// (wire.Status with StatusStandby) out of the frames the primary receives
// and keeps a Quorum of the epoch's voters. Observe, SetPublished and
// Stable run on the primary's sequencing goroutine only; SetVoters and
// BeyondPublished are safe from any.
type QuorumAcks struct {
	session uint64
	q       *Quorum
	st      wire.Status
	// published bounds every ack: no standby can hold a seq the primary
	// never published, so an ack above it is a stale report of another
	// epoch's primary or a forgery, and never counts (the sequencer's own
	// status path has the same bound, Stats.StatusBeyondTail).
	published uint64
	beyond    atomic.Uint64 // acks above published, ignored
	// voters is a membership change not yet applied (SetVoters): the
	// sequencing goroutine takes it at its next Observe or Stable.
	voters atomic.Pointer[[]uint64]
	// seen is the last ack of this epoch of every member that acked,
	// voter or not (the first MaxVoters ids): a member added as a
	// nonvoter is promoted once it caught up (Member.AddMember). Written
	// on the sequencing goroutine, read from any.
	seen [MaxVoters]seenAck
}

type seenAck struct {
	id  atomic.Uint64
	seq atomic.Uint64
}

// NewQuorumAcks returns the ack tracker of epoch e: acks count from e's
// voters (e.Members), for e.Epoch and e.Session; stable starts at the cut
// (e.FirstSeq-1). It is a Deps.Acks:
//
//	Acks: func(e cluster.Epoch) cluster.Acks { return cluster.NewQuorumAcks(e) }
func NewQuorumAcks(e Epoch) *QuorumAcks {
	ids := make([]uint64, 0, len(e.Members))
	for _, m := range e.Members {
		ids = append(ids, m.ID)
	}
	q := NewQuorum()
	// Voters past MaxVoters cannot exist (fsm.MaxMembers is the same
	// bound); the first MaxVoters count.
	_ = q.Reset(e.Epoch, e.Self, ids, e.FirstSeq-1)
	return &QuorumAcks{session: e.Session, q: q, published: e.FirstSeq - 1}
}

// SetPublished records that the primary published every seq up to seq:
// acks up to it may count. It only moves forward. The shell calls it
// before each Observe (a standby may ack what the primary published an
// instant ago, within the same poll).
func (a *QuorumAcks) SetPublished(seq uint64) { a.published = max(a.published, seq) }

// BeyondPublished is the number of standby acks ignored because they
// claimed a seq above what the primary had published.
func (a *QuorumAcks) BeyondPublished() uint64 { return a.beyond.Load() }

// SetVoters changes the epoch's voting members (a member added, removed,
// promoted or demoted through Raft): a removed member's acks stop counting
// at the next Observe or Stable. Safe from any goroutine. More than
// MaxVoters distinct ids is ErrTooManyVoters (the first MaxVoters count).
func (a *QuorumAcks) SetVoters(voters []uint64) error {
	v := append([]uint64(nil), voters...)
	a.voters.Store(&v)
	distinct := 0
	for i, id := range v {
		if id != 0 && !slices.Contains(v[:i], id) {
			distinct++
		}
	}
	if distinct > MaxVoters {
		return ErrTooManyVoters
	}
	return nil
}

// takeVoters applies a pending SetVoters.
func (a *QuorumAcks) takeVoters() {
	if v := a.voters.Swap(nil); v != nil {
		_ = a.q.SetVoters(*v) // at most MaxVoters count, as in NewQuorumAcks
	}
}

// Observe takes a standby's ack out of frame, if it is one; anything else
// is ignored (the Core steps it). It allocates nothing.
func (a *QuorumAcks) Observe(frame []byte, _ transport.Peer) {
	if k, err := wire.PeekKind(frame); err != nil || k != wire.KindStatus {
		return
	}
	s := &a.st
	if wire.DecodeStatus(frame, s) != nil || s.Flags&wire.StatusStandby == 0 || s.Session != a.session {
		return
	}
	if s.Contiguous > a.published {
		a.beyond.Add(1)
		return
	}
	if a.voters.Load() != nil {
		a.takeVoters()
	}
	if s.Epoch == a.q.Epoch() {
		a.see(s.Member, s.Contiguous)
	}
	a.q.Ack(s.Member, s.Epoch, s.Contiguous)
}

// see records member's ack of seq (the first MaxVoters members only).
func (a *QuorumAcks) see(member, seq uint64) {
	if member == 0 {
		return
	}
	for i := range a.seen {
		e := &a.seen[i]
		switch e.id.Load() {
		case member:
			if seq > e.seq.Load() {
				e.seq.Store(seq)
			}
			return
		case 0:
			e.seq.Store(seq)
			e.id.Store(member)
			return
		}
	}
}

// AckedBy is the highest seq member acked in this epoch, voter or not
// (false: no ack seen). Safe from any goroutine.
func (a *QuorumAcks) AckedBy(member uint64) (uint64, bool) {
	for i := range a.seen {
		if e := &a.seen[i]; e.id.Load() == member {
			return e.seq.Load(), true
		}
	}
	return 0, false
}

// Stable records the primary's own position (what it holds: published, or
// what it wrote) and returns the quorum's stable seq. That position is
// published too, so it raises the bound of SetPublished.
func (a *QuorumAcks) Stable(published uint64) uint64 {
	if a.voters.Load() != nil {
		a.takeVoters()
	}
	a.published = max(a.published, published)
	a.q.SetSelf(published)
	return a.q.Stable()
}

// Quorum is the tracker's quorum (for tests and status).
func (a *QuorumAcks) Quorum() *Quorum { return a.q }

var _ Acks = (*QuorumAcks)(nil)
