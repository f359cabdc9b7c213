package cluster

import (
	"slices"
	"sync"

	"github.com/seqd/seqd/sequencer"
)

// Quorum computes the primary's stable seq: the highest seq held by a
// majority of the current epoch's voting members, the primary itself
// included. It is pure and not safe for concurrent use: the primary's
// shell feeds it the standbys' acks (sequencer.Core's StandbyAcks) and its
// own position, and hands Stable to Core.SetStable.
//
// An ack counts only when it names a voter of the current epoch and that
// epoch: an ack of an older epoch (a standby still reporting what it held
// under the previous primary, or a delayed datagram), or from a member
// that is not a voter (a nonvoter catching up, a removed member, a
// stranger), never counts. Aeron Cluster counted stale members' positions
// and shipped a commit of entries no quorum held; this is that test.
//
// Within an epoch stable never goes back: a membership change keeps what
// was stable (each change adds or removes one voter, so the old and new
// majorities intersect, as Raft's single-server changes do).
type Quorum struct {
	epoch  uint32
	self   uint64 // the primary's member id
	voters []voterPos
	stable uint64
	seqs   []uint64 // scratch for Stable
}

type voterPos struct {
	id  uint64
	seq uint64
}

// NewQuorum returns a Quorum for up to MaxVoters voting members, with no
// epoch: nothing counts until Reset.
func NewQuorum() *Quorum {
	return &Quorum{voters: make([]voterPos, 0, MaxVoters), seqs: make([]uint64, 0, MaxVoters)}
}

// Reset starts epoch epoch with primary self (a voter) and the voting
// members voters (self among them). Every position is forgotten, stable
// included: acks of earlier epochs never count toward this one, and the
// new epoch begins at cut (stable starts there: the previous epochs' seqs up
// to the cut are stable by the seal). Voters beyond MaxVoters are ignored
// (ErrTooManyVoters); ids 0 and repeats are skipped.
func (q *Quorum) Reset(epoch uint32, self uint64, voters []uint64, cut uint64) error {
	q.epoch, q.self, q.stable = epoch, self, cut
	q.voters = q.voters[:0]
	return q.setVoters(voters)
}

// SetVoters changes the voting members within the epoch: members that
// stay keep their positions, new ones start at 0 (their acks of this
// epoch count from now on), removed ones are forgotten at once.
func (q *Quorum) SetVoters(voters []uint64) error {
	return q.setVoters(voters)
}

func (q *Quorum) setVoters(voters []uint64) error {
	old := q.voters
	// Rebuild in place: keep the positions of members that stay. old and
	// the result share the backing array, so copy the kept ones first.
	var keep [MaxVoters]voterPos
	nk := copy(keep[:], old)
	q.voters = q.voters[:0]
	var err error
	for _, id := range voters {
		if id == 0 || slices.ContainsFunc(q.voters, func(v voterPos) bool { return v.id == id }) {
			continue
		}
		if len(q.voters) == cap(q.voters) {
			err = ErrTooManyVoters
			break
		}
		v := voterPos{id: id}
		for _, k := range keep[:nk] {
			if k.id == id {
				v.seq = k.seq
			}
		}
		q.voters = append(q.voters, v)
	}
	q.update()
	return err
}

// MaxVoters bounds the voters a Quorum tracks (fsm.MaxMembers).
const MaxVoters = 64

// Ack records that member holds every seq up to seq in epoch epoch, and
// reports whether it counted (a voter of the current epoch, for the
// current epoch). Positions only move forward. It allocates nothing.
func (q *Quorum) Ack(member uint64, epoch uint32, seq uint64) bool {
	if epoch != q.epoch || member == q.self {
		// The primary's own position comes from SetSelf, never from the
		// network: a forged or looped-back status cannot speak for it.
		return false
	}
	for i := range q.voters {
		if v := &q.voters[i]; v.id == member {
			if seq > v.seq {
				v.seq = seq
				q.update()
			}
			return true
		}
	}
	return false
}

// SetSelf records the primary's own position: what it holds (published,
// or persisted when it persists its own stream).
func (q *Quorum) SetSelf(seq uint64) {
	for i := range q.voters {
		if v := &q.voters[i]; v.id == q.self {
			if seq > v.seq {
				v.seq = seq
				q.update()
			}
			return
		}
	}
}

// Stable is the highest seq a majority of the voters hold (never below
// the epoch's cut, never going back within the epoch).
func (q *Quorum) Stable() uint64 { return q.stable }

// Epoch is the epoch whose acks count.
func (q *Quorum) Epoch() uint32 { return q.epoch }

// update recomputes stable: the majority-th highest position.
func (q *Quorum) update() {
	n := len(q.voters)
	if n == 0 {
		return
	}
	s := q.seqs[:0]
	for _, v := range q.voters {
		s = append(s, v.seq)
	}
	// Insertion sort, descending: n is 3 or 5, at most 64.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] > s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	q.seqs = s
	if m := s[n/2]; m > q.stable {
		q.stable = m
	}
}

// SharedQuorum is a Quorum behind a mutex, for a primary whose Agent feeds
// it acks (Update, as its sequencer.StableFunc) while the Raft goroutine
// changes its epoch and voters. Lock order: SharedQuorum.mu is a leaf.
type SharedQuorum struct {
	mu sync.Mutex
	q  *Quorum
}

// NewSharedQuorum returns a SharedQuorum with no epoch (see Reset).
func NewSharedQuorum() *SharedQuorum { return &SharedQuorum{q: NewQuorum()} }

// Reset is Quorum.Reset.
func (s *SharedQuorum) Reset(epoch uint32, self uint64, voters []uint64, cut uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.Reset(epoch, self, voters, cut)
}

// SetVoters is Quorum.SetVoters.
func (s *SharedQuorum) SetVoters(voters []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.SetVoters(voters)
}

// Update records the primary's position (published) and the standby acks
// of one Agent iteration and returns the stable seq: a
// sequencer.StableFunc (pass the method value s.Update to
// Agent.SetStableFunc). It allocates nothing.
func (s *SharedQuorum) Update(acks []sequencer.StandbyAck, published uint64) uint64 {
	s.mu.Lock()
	s.q.SetSelf(published)
	for i := range acks {
		s.q.Ack(acks[i].Member, acks[i].Epoch, acks[i].Contiguous)
	}
	st := s.q.Stable()
	s.mu.Unlock()
	return st
}

// Stable is Quorum.Stable.
func (s *SharedQuorum) Stable() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.Stable()
}
