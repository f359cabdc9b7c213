package fsm

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Bounds of the state. They are part of the replicated format: every member
// must apply the same bounds, so they are constants, not configuration.
const (
	// MaxCheckpoints is how many checkpoints the state keeps (the latest).
	MaxCheckpoints = 64
	// MaxCuts is how many epoch cuts the state keeps (the latest).
	MaxCuts = 1024
	// MaxMembers bounds the member table; a cluster has 3 or 5 voters and
	// a few nonvoters, so 64 leaves room without letting the table grow
	// with proposals.
	MaxMembers = 64
	// MaxAddrBytes bounds each address string of a member.
	MaxAddrBytes = 255
)

// Role is a member's Raft role.
type Role uint8

// Roles. A voter takes part in elections and quorums and may be primary; a
// nonvoter follows the log (a standby being caught up, or a replayer).
const (
	Voter    Role = 1
	Nonvoter Role = 2
)

func (r Role) String() string {
	switch r {
	case Voter:
		return "voter"
	case Nonvoter:
		return "nonvoter"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Member is one sequencer process of the cluster. ID is what the cluster
// gives hashicorp/raft as ServerID (formatted in decimal); the addresses
// let nodes and peers find the process when it becomes primary.
type Member struct {
	ID          uint64
	Role        Role
	RaftAddr    string
	StreamAddr  string
	CommandAddr string
	AdminAddr   string
}

// Validate says whether m may be recorded (AddMember): an id, role Voter
// or Nonvoter, a raft address, addresses within MaxAddrBytes. A caller
// checks it before it touches Raft's own configuration.
func (m Member) Validate() error { return m.validate() }

func (m Member) validate() error {
	if m.ID == 0 {
		return fmt.Errorf("%w: id 0 is reserved for \"no member\"", ErrBadMember)
	}
	if m.Role != Voter && m.Role != Nonvoter {
		return fmt.Errorf("%w: member %d: role %d (want 1 voter or 2 nonvoter)", ErrBadMember, m.ID, m.Role)
	}
	if m.RaftAddr == "" {
		return fmt.Errorf("%w: member %d: empty raft address", ErrBadMember, m.ID)
	}
	for _, a := range [...]string{m.RaftAddr, m.StreamAddr, m.CommandAddr, m.AdminAddr} {
		if len(a) > MaxAddrBytes {
			return fmt.Errorf("%w: member %d: address of %d bytes (max %d)", ErrBadMember, m.ID, len(a), MaxAddrBytes)
		}
	}
	return nil
}

// Cut records the end of an epoch: its last sequence number in its session.
// Epoch Epoch+1 of the same session starts at Last+1.
type Cut struct {
	Session uint64
	Epoch   uint64
	Primary uint64 // the primary of that epoch
	Last    uint64
}

// Checkpoint is a (seq, sequencer time) pair the primary recorded: a seq it
// knew stable (held by a quorum), so no later cut may fall below it, and a
// time the next primary's clock must not go back behind.
type Checkpoint struct {
	Seq      uint64
	UnixNano int64
}

// State is the failover state. A *State is immutable once published:
// Apply returns a new value and never changes its receiver, so any number of
// goroutines may read one without locks. Slices are reached through methods
// that return copies.
type State struct {
	index       uint64 // raft index of the last applied log entry
	session     uint64
	epoch       uint64
	primary     uint64
	epochStart  uint64 // first seq of the current epoch in the current session
	cuts        []Cut  // ascending by epoch, at most MaxCuts
	checkpoints []Checkpoint
	members     []Member // ascending by ID
	sealed      uint64   // the newest epoch a leader sealed (SealEpoch), 0: none
}

// Initial returns the state of a new cluster: no session, epoch 0 with no
// primary starting at seq 1, no members.
func Initial() *State { return &State{epochStart: 1} }

// AppliedIndex is the raft index of the last log entry applied (0 before any).
func (s *State) AppliedIndex() uint64 { return s.index }

// Session is the current session id (0: none yet). Session ids only grow.
func (s *State) Session() uint64 { return s.session }

// Epoch is the current epoch (0: none begun). Epochs only grow, across
// sessions too, so receivers can fence by epoch alone.
func (s *State) Epoch() uint64 { return s.epoch }

// Primary is the member id of the current epoch's primary (0: none).
func (s *State) Primary() uint64 { return s.primary }

// EpochStart is the first seq of the current epoch in the current session.
func (s *State) EpochStart() uint64 { return s.epochStart }

// Sealed is the newest epoch a new leader recorded as sealed (SealEpoch;
// 0: none): a standby acks no record of it or an earlier epoch. It is the
// current epoch while an epoch change is under way, older once the next
// epoch began.
func (s *State) Sealed() uint64 { return s.sealed }

// Cuts returns a copy of the recorded cuts, oldest first.
func (s *State) Cuts() []Cut { return slices.Clone(s.cuts) }

// Cut returns the cut of epoch e, if it is still recorded.
func (s *State) Cut(e uint64) (Cut, bool) {
	i, ok := slices.BinarySearchFunc(s.cuts, e, func(c Cut, e uint64) int { return cmp.Compare(c.Epoch, e) })
	if !ok {
		return Cut{}, false
	}
	return s.cuts[i], true
}

// Checkpoints returns a copy of the checkpoints of the current session,
// oldest first.
func (s *State) Checkpoints() []Checkpoint { return slices.Clone(s.checkpoints) }

// LastCheckpoint returns the latest checkpoint of the current session.
func (s *State) LastCheckpoint() (Checkpoint, bool) {
	if len(s.checkpoints) == 0 {
		return Checkpoint{}, false
	}
	return s.checkpoints[len(s.checkpoints)-1], true
}

// Members returns a copy of the member table, ascending by id.
func (s *State) Members() []Member { return slices.Clone(s.members) }

// Member returns the member with the given id.
func (s *State) Member(id uint64) (Member, bool) {
	i, ok := s.findMember(id)
	if !ok {
		return Member{}, false
	}
	return s.members[i], true
}

// Equal reports whether two states are identical (the applied index too).
func (s *State) Equal(o *State) bool {
	return s.index == o.index && s.session == o.session && s.epoch == o.epoch &&
		s.primary == o.primary && s.epochStart == o.epochStart && s.sealed == o.sealed &&
		slices.Equal(s.cuts, o.cuts) && slices.Equal(s.checkpoints, o.checkpoints) &&
		slices.Equal(s.members, o.members)
}

func (s *State) String() string {
	return fmt.Sprintf("index=%d session=%d epoch=%d primary=%d start=%d sealed=%d cuts=%d checkpoints=%d members=%d",
		s.index, s.session, s.epoch, s.primary, s.epochStart, s.sealed, len(s.cuts), len(s.checkpoints), len(s.members))
}

func (s *State) findMember(id uint64) (int, bool) {
	return slices.BinarySearchFunc(s.members, id, func(m Member, id uint64) int { return cmp.Compare(m.ID, id) })
}

func (s *State) clone() *State {
	n := *s
	n.cuts = slices.Clone(s.cuts)
	n.checkpoints = slices.Clone(s.checkpoints)
	n.members = slices.Clone(s.members)
	return &n
}

// Apply validates cmd against s and returns the state after it, with its
// applied index set to index. It is pure and deterministic: no clock, no
// randomness, no map iteration; s is never changed. A command that breaks a
// rule returns s unchanged but for the index, and an error that wraps one of
// the rejection sentinels.
func (s *State) Apply(index uint64, cmd Command) (*State, error) {
	if err := s.check(cmd); err != nil {
		n := *s // slices are shared: neither value is ever changed
		n.index = index
		return &n, err
	}
	n := s.clone()
	n.index = index
	n.apply(cmd)
	return n, nil
}

// check holds every validation rule; apply assumes check passed.
func (s *State) check(cmd Command) error {
	switch c := cmd.(type) {
	case NewSession:
		if c.Prev != s.session {
			return fmt.Errorf("%w: proposed after session %d, current is %d", ErrStaleSession, c.Prev, s.session)
		}
		if c.ID == 0 && s.session == math.MaxUint64 {
			return fmt.Errorf("%w: session id", ErrSeqOverflow)
		}
		if c.ID != 0 && c.ID <= s.session {
			return fmt.Errorf("%w: proposed %d, current is %d", ErrSessionNotAfter, c.ID, s.session)
		}
	case BeginEpoch:
		if s.session == 0 {
			return fmt.Errorf("begin epoch %d: %w", c.Epoch, ErrNoSession)
		}
		if s.epoch == math.MaxUint64 || c.Epoch != s.epoch+1 {
			return fmt.Errorf("%w: proposed %d, current %d", ErrEpochNotNext, c.Epoch, s.epoch)
		}
		if m, ok := s.Member(c.Primary); !ok || m.Role != Voter {
			return fmt.Errorf("%w: epoch %d primary %d", ErrPrimaryNotVoter, c.Epoch, c.Primary)
		}
		if c.PrevCut < s.epochStart-1 {
			return fmt.Errorf("%w: epoch %d cut %d, epoch %d started at %d", ErrCutBeforeEpochStart, s.epoch, c.PrevCut, s.epoch, s.epochStart)
		}
		if s.primary == 0 && c.PrevCut != s.epochStart-1 {
			return fmt.Errorf("%w: epoch %d cut %d, start %d", ErrCutWithoutPrimary, s.epoch, c.PrevCut, s.epochStart)
		}
		if cp, ok := s.LastCheckpoint(); ok && c.PrevCut < cp.Seq {
			return fmt.Errorf("%w: epoch %d cut %d, checkpoint at %d", ErrCutBelowCheckpoint, s.epoch, c.PrevCut, cp.Seq)
		}
		if c.PrevCut == math.MaxUint64 {
			return fmt.Errorf("%w: epoch %d cut %d", ErrSeqOverflow, s.epoch, c.PrevCut)
		}
	case AddCheckpoint:
		if s.session == 0 {
			return fmt.Errorf("checkpoint %d: %w", c.Seq, ErrNoSession)
		}
		if c.Epoch != s.epoch {
			return fmt.Errorf("%w: checkpoint of epoch %d, current %d", ErrStaleEpoch, c.Epoch, s.epoch)
		}
		if s.primary == 0 {
			return fmt.Errorf("%w: epoch %d", ErrNoEpoch, s.epoch)
		}
		if c.Seq == 0 || c.Seq < s.epochStart-1 {
			return fmt.Errorf("%w: seq %d, epoch %d starts at %d", ErrCheckpointBeforeCut, c.Seq, s.epoch, s.epochStart)
		}
		if cp, ok := s.LastCheckpoint(); ok {
			if c.Seq <= cp.Seq {
				return fmt.Errorf("%w: seq %d, latest %d", ErrCheckpointNotAfter, c.Seq, cp.Seq)
			}
			if c.UnixNano < cp.UnixNano {
				return fmt.Errorf("%w: seq %d time %d, latest %d", ErrClockBackwards, c.Seq, c.UnixNano, cp.UnixNano)
			}
		}
	case AddMember:
		if err := c.Member.validate(); err != nil {
			return err
		}
		if _, ok := s.findMember(c.Member.ID); ok {
			return fmt.Errorf("%w: %d", ErrMemberExists, c.Member.ID)
		}
		for _, m := range s.members {
			if m.RaftAddr == c.Member.RaftAddr {
				return fmt.Errorf("%w: %q is member %d's", ErrAddressInUse, m.RaftAddr, m.ID)
			}
		}
		if len(s.members) >= MaxMembers {
			return fmt.Errorf("%w: %d members", ErrTooManyMembers, len(s.members))
		}
	case RemoveMember:
		if _, ok := s.findMember(c.ID); !ok {
			return fmt.Errorf("remove member %d: %w", c.ID, ErrUnknownMember)
		}
		if c.ID == s.primary {
			return fmt.Errorf("%w: %d (epoch %d)", ErrRemovePrimary, c.ID, s.epoch)
		}
	case SetRole:
		if c.Role != Voter && c.Role != Nonvoter {
			return fmt.Errorf("%w: member %d: role %d (want 1 voter or 2 nonvoter)", ErrBadMember, c.ID, c.Role)
		}
		if _, ok := s.findMember(c.ID); !ok {
			return fmt.Errorf("set role of member %d: %w", c.ID, ErrUnknownMember)
		}
		if c.ID == s.primary && c.Role != Voter {
			return fmt.Errorf("%w: %d (epoch %d)", ErrDemotePrimary, c.ID, s.epoch)
		}
	case SealEpoch:
		if c.Epoch != s.epoch {
			return fmt.Errorf("%w: seal of epoch %d, current %d", ErrSealNotCurrent, c.Epoch, s.epoch)
		}
		if s.primary == 0 {
			return fmt.Errorf("seal: %w: epoch %d", ErrNoEpoch, s.epoch)
		}
	case DropCheckpoints:
		if s.session == 0 {
			return fmt.Errorf("drop checkpoints: %w", ErrNoSession)
		}
		if c.Epoch != s.epoch {
			return fmt.Errorf("%w: drop checkpoints of epoch %d, current %d", ErrStaleEpoch, c.Epoch, s.epoch)
		}
		if s.sealed != s.epoch || s.primary == 0 {
			return fmt.Errorf("%w: epoch %d, sealed %d", ErrDropNotSealed, s.epoch, s.sealed)
		}
		if c.Above < s.epochStart-1 {
			return fmt.Errorf("%w: drop checkpoints above %d, epoch %d starts at %d", ErrCheckpointBeforeCut, c.Above, s.epoch, s.epochStart)
		}
	default:
		return fmt.Errorf("%w: %T", ErrUnknownCommand, cmd)
	}
	return nil
}

func (s *State) apply(cmd Command) {
	switch c := cmd.(type) {
	case NewSession:
		// The sequence restarts at 1 in the new session, inside the current
		// epoch (same primary). Checkpoints name seqs of the old session,
		// so they go; cuts stay, tagged with their session.
		s.session = c.next()
		s.epochStart = 1
		s.checkpoints = s.checkpoints[:0]
	case BeginEpoch:
		s.cuts = append(s.cuts, Cut{Session: s.session, Epoch: s.epoch, Primary: s.primary, Last: c.PrevCut})
		if len(s.cuts) > MaxCuts {
			s.cuts = slices.Delete(s.cuts, 0, len(s.cuts)-MaxCuts)
		}
		s.epoch = c.Epoch
		s.primary = c.Primary
		s.epochStart = c.PrevCut + 1
	case AddCheckpoint:
		s.checkpoints = append(s.checkpoints, Checkpoint{Seq: c.Seq, UnixNano: c.UnixNano})
		if len(s.checkpoints) > MaxCheckpoints {
			s.checkpoints = slices.Delete(s.checkpoints, 0, len(s.checkpoints)-MaxCheckpoints)
		}
	case AddMember:
		i, _ := s.findMember(c.Member.ID)
		s.members = slices.Insert(s.members, i, c.Member)
	case RemoveMember:
		i, _ := s.findMember(c.ID)
		s.members = slices.Delete(s.members, i, i+1)
	case SetRole:
		i, _ := s.findMember(c.ID)
		s.members[i].Role = c.Role
	case SealEpoch:
		s.sealed = c.Epoch
	case DropCheckpoints:
		i := len(s.checkpoints)
		for i > 0 && s.checkpoints[i-1].Seq > c.Above {
			i--
		}
		s.checkpoints = s.checkpoints[:i]
	}
}

// validate checks the invariants Apply keeps; Restore runs it on a decoded
// snapshot so a corrupt or hostile one is refused, not adopted.
func (s *State) validate() error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: "+what, append([]any{ErrInvalidState}, args...)...)
	}
	if s.epochStart == 0 {
		return bad("epoch start 0")
	}
	if s.session == 0 && (s.epoch != 0 || len(s.checkpoints) > 0) {
		return bad("epoch %d or checkpoints without a session", s.epoch)
	}
	if s.primary == 0 && len(s.checkpoints) > 0 {
		return bad("checkpoints without a primary")
	}
	if s.sealed > s.epoch {
		return bad("sealed epoch %d after the current %d", s.sealed, s.epoch)
	}
	if len(s.cuts) > MaxCuts || len(s.checkpoints) > MaxCheckpoints || len(s.members) > MaxMembers {
		return bad("table over its bound")
	}
	if uint64(len(s.cuts)) > s.epoch {
		return bad("%d cuts in epoch %d", len(s.cuts), s.epoch)
	}
	for i, c := range s.cuts {
		// BeginEpoch records the cut of the epoch it ends, so cut epochs
		// run e, e+1, ..., current-1 (trimmed only at the front), and
		// within one session a cut is never below the one before.
		if c.Session == 0 || c.Session > s.session || c.Epoch != s.epoch-uint64(len(s.cuts)-i) {
			return bad("cut %d of epoch %d session %d out of order", i, c.Epoch, c.Session)
		}
		if i > 0 {
			if p := s.cuts[i-1]; c.Session < p.Session || (c.Session == p.Session && c.Last < p.Last) {
				return bad("cut %d of epoch %d below the one before", i, c.Epoch)
			}
		}
	}
	if n := len(s.cuts); n > 0 && s.cuts[n-1].Session == s.session && s.epochStart != s.cuts[n-1].Last+1 {
		return bad("epoch %d starts at %d, its predecessor's cut is %d", s.epoch, s.epochStart, s.cuts[n-1].Last)
	}
	for i, c := range s.checkpoints {
		if c.Seq == 0 || (i > 0 && (c.Seq <= s.checkpoints[i-1].Seq || c.UnixNano < s.checkpoints[i-1].UnixNano)) {
			return bad("checkpoint %d out of order", i)
		}
	}
	for i, m := range s.members {
		if err := m.validate(); err != nil {
			return bad("%v", err)
		}
		if i > 0 && m.ID <= s.members[i-1].ID {
			return bad("member %d out of order", m.ID)
		}
		for _, o := range s.members[:i] {
			if o.RaftAddr == m.RaftAddr {
				return bad("members %d and %d share raft address", o.ID, m.ID)
			}
		}
	}
	if s.primary != 0 {
		if m, ok := s.Member(s.primary); !ok || m.Role != Voter {
			return bad("primary %d is not a voting member", s.primary)
		}
	}
	return nil
}
