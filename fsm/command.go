package fsm

import (
	"encoding/binary"
	"fmt"
)

// CommandVersion is the first byte of every encoded command. A member
// refuses (deterministically, through Apply's error) a version it does not
// know, so a rolling upgrade must not propose a new version before every
// member understands it.
const CommandVersion = 1

// Kind is the second byte of an encoded command.
type Kind uint8

// Command kinds. The numbers are part of the log format: never reuse one.
const (
	KindNewSession   Kind = 1
	KindBeginEpoch   Kind = 2
	KindCheckpoint   Kind = 3
	KindAddMember    Kind = 4
	KindRemoveMember Kind = 5
	KindSetRole      Kind = 6
	// KindDrawnSession is a NewSession with its ID: kind 1 stays the one
	// without, as logs written before ids were drawn hold it.
	KindDrawnSession Kind = 7
	// KindSealEpoch records that a new leader sealed the current epoch
	// (SealEpoch).
	KindSealEpoch Kind = 8
	// KindDropCheckpoints drops the checkpoints above a sealed epoch's
	// cut (DropCheckpoints).
	KindDropCheckpoints Kind = 9
)

func (k Kind) String() string {
	switch k {
	case KindNewSession:
		return "new-session"
	case KindBeginEpoch:
		return "begin-epoch"
	case KindCheckpoint:
		return "checkpoint"
	case KindAddMember:
		return "add-member"
	case KindRemoveMember:
		return "remove-member"
	case KindSetRole:
		return "set-role"
	case KindDrawnSession:
		return "drawn-session"
	case KindSealEpoch:
		return "seal-epoch"
	case KindDropCheckpoints:
		return "drop-checkpoints"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Command is one change to the failover state, proposed through Raft. The
// concrete types are NewSession, BeginEpoch, AddCheckpoint, AddMember,
// RemoveMember, SetRole, SealEpoch and DropCheckpoints; each one's doc
// comment states its rules.
type Command interface {
	Kind() Kind
	appendBody(dst []byte) []byte
}

// NewSession starts session ID (0: Prev+1, as every session was numbered
// before the cluster drew its ids, and as old log entries still decode).
// Prev must be the current session id (compare-and-set), so two
// proposers racing make one session, and the loser learns
// ErrStaleSession; ID must be above Prev (ErrSessionNotAfter): ids only
// grow. A cluster draws ID at bootstrap (cluster.NewSessionID) so that
// no two clusters share a session, and every store refuses another
// session's directory. The sequence restarts at 1 within the current
// epoch; the checkpoints of the old session are dropped.
type NewSession struct {
	Prev uint64
	ID   uint64
}

// next is the session c starts.
func (c NewSession) next() uint64 {
	if c.ID == 0 {
		return c.Prev + 1
	}
	return c.ID
}

// BeginEpoch ends the current epoch at PrevCut and starts epoch Epoch with
// Primary, at seq PrevCut+1. Rules, checked in this order:
//   - a session exists (ErrNoSession);
//   - Epoch is the current epoch + 1 (ErrEpochNotNext): a stale or
//     duplicated proposal is refused, never applied twice;
//   - Primary is a voting member (ErrPrimaryNotVoter);
//   - PrevCut >= the current epoch's start - 1 (ErrCutBeforeEpochStart):
//     equal means the epoch sequenced nothing;
//   - if the current epoch has no primary (epoch 0 or none yet), PrevCut
//     equals its start - 1 (ErrCutWithoutPrimary): nothing was sequenced;
//   - PrevCut >= the latest checkpoint's seq (ErrCutBelowCheckpoint): a
//     checkpoint records a seq a quorum held, which no cut may drop;
//   - PrevCut < 2^64-1 (ErrSeqOverflow).
type BeginEpoch struct {
	Epoch   uint64
	Primary uint64
	PrevCut uint64
}

// AddCheckpoint records (Seq, UnixNano) for the current session. Rules:
// a session exists (ErrNoSession); Epoch is the current epoch
// (ErrStaleEpoch: an old primary's late checkpoint is fenced); the epoch has
// a primary (ErrNoEpoch); Seq >= 1 and Seq >= the epoch's start - 1
// (ErrCheckpointBeforeCut); Seq is above the latest checkpoint's
// (ErrCheckpointNotAfter) and UnixNano not below its time
// (ErrClockBackwards). Only the latest MaxCheckpoints are kept.
type AddCheckpoint struct {
	Epoch    uint64
	Seq      uint64
	UnixNano int64
}

// AddMember adds a member. Rules: the member is valid (ErrBadMember: id not
// 0, role Voter or Nonvoter, a raft address, addresses at most
// MaxAddrBytes); its id is new (ErrMemberExists); no other member has its
// raft address (ErrAddressInUse); the table has room (ErrTooManyMembers).
// To change a member's addresses, remove and add it.
type AddMember struct {
	Member Member
}

// RemoveMember removes member ID. Rules: it is a member (ErrUnknownMember)
// and not the current primary (ErrRemovePrimary: hand the primary role over
// first).
type RemoveMember struct {
	ID uint64
}

// SetRole changes member ID's role, to promote a standby that caught up as
// a nonvoter, or to demote a voter before removing it. Rules: the role is
// Voter or Nonvoter (ErrBadMember); ID is a member (ErrUnknownMember); the
// current primary stays a voter (ErrDemotePrimary). Setting the role a
// member has is accepted and changes nothing.
type SetRole struct {
	ID   uint64
	Role Role
}

// SealEpoch records that a new Raft leader sealed Epoch, before it asks
// any member to: a member that (re)opens its standby seals every epoch up
// to State.Sealed before it follows the stream, so one restarted between
// its seal answer and the next epoch's commit acks nothing more of the
// sealed epoch (issue 14 item 7). Rules: Epoch is the current epoch
// (ErrSealNotCurrent) and has a primary (ErrNoEpoch: an epoch without one
// sequenced nothing and is never sealed). Sealing the sealed epoch again
// (a retried attempt) is accepted and changes nothing.
type SealEpoch struct {
	Epoch uint64
}

// DropCheckpoints drops the checkpoints above Above, a sealed epoch's
// cut, so that the epoch can begin at that cut (BeginEpoch refuses a cut
// below a checkpoint). A checkpoint records a seq a quorum held, and a
// quorum of seal answers meets every quorum, so a checkpoint above every
// answer of a quorum was never held by one: stable was raised by forged
// standby acks, or the writes were lost to a power cut (issues 14 and
// 16). Without this, every later leader failed "cut is below a recorded
// checkpoint" forever. Rules: a session exists (ErrNoSession); Epoch is
// the current epoch (ErrStaleEpoch) and has been sealed (ErrDropNotSealed:
// only a leader that sealed it, with every member's answer or the seal's
// timeout, may); Above >= the epoch's start - 1 (ErrCheckpointBeforeCut).
// Dropping nothing is accepted and changes nothing.
type DropCheckpoints struct {
	Epoch uint64
	Above uint64
}

// Kind is KindDrawnSession when c carries its ID, else KindNewSession.
func (c NewSession) Kind() Kind {
	if c.ID != 0 {
		return KindDrawnSession
	}
	return KindNewSession
}

func (BeginEpoch) Kind() Kind    { return KindBeginEpoch }
func (AddCheckpoint) Kind() Kind { return KindCheckpoint }
func (AddMember) Kind() Kind     { return KindAddMember }
func (RemoveMember) Kind() Kind  { return KindRemoveMember }
func (SetRole) Kind() Kind       { return KindSetRole }
func (SealEpoch) Kind() Kind     { return KindSealEpoch }

// Kind is KindDropCheckpoints.
func (DropCheckpoints) Kind() Kind { return KindDropCheckpoints }

// appendBody writes Prev, then ID when it is set (KindDrawnSession).
func (c NewSession) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, c.Prev)
	if c.ID != 0 {
		b = binary.BigEndian.AppendUint64(b, c.ID)
	}
	return b
}

func (c BeginEpoch) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, c.Epoch)
	b = binary.BigEndian.AppendUint64(b, c.Primary)
	return binary.BigEndian.AppendUint64(b, c.PrevCut)
}

func (c AddCheckpoint) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, c.Epoch)
	b = binary.BigEndian.AppendUint64(b, c.Seq)
	return binary.BigEndian.AppendUint64(b, uint64(c.UnixNano))
}

func (c AddMember) appendBody(b []byte) []byte { return appendMember(b, c.Member) }

func (c RemoveMember) appendBody(b []byte) []byte { return binary.BigEndian.AppendUint64(b, c.ID) }

func (c SetRole) appendBody(b []byte) []byte {
	return append(binary.BigEndian.AppendUint64(b, c.ID), byte(c.Role))
}

func (c SealEpoch) appendBody(b []byte) []byte { return binary.BigEndian.AppendUint64(b, c.Epoch) }

func (c DropCheckpoints) appendBody(b []byte) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, c.Epoch), c.Above)
}

// AppendCommand appends the encoding of c to dst:
//
//	version u8 (=1) | kind u8 | body
//
// Integers are big-endian and fixed width; a member is
// id u64 | role u8 | four strings (raft, stream, command, admin address),
// each a u8 length and its bytes. The encoding is exact: Decode refuses
// trailing bytes. It fails only for an address longer than MaxAddrBytes,
// which no valid member has.
func AppendCommand(dst []byte, c Command) ([]byte, error) {
	if a, ok := c.(AddMember); ok {
		m := a.Member
		for _, s := range [...]string{m.RaftAddr, m.StreamAddr, m.CommandAddr, m.AdminAddr} {
			if len(s) > MaxAddrBytes {
				return dst, fmt.Errorf("%w: member %d: address of %d bytes (max %d)", ErrBadMember, m.ID, len(s), MaxAddrBytes)
			}
		}
	}
	dst = append(dst, CommandVersion, byte(c.Kind()))
	return c.appendBody(dst), nil
}

// Encode returns the encoding of c (see AppendCommand).
func Encode(c Command) ([]byte, error) { return AppendCommand(make([]byte, 0, 64), c) }

// Decode parses one command. Malformed bytes return an error wrapping
// ErrMalformed, ErrUnknownVersion or ErrUnknownCommand; it never panics.
// Semantic rules (a valid role, an existing member) are Apply's, so that a
// proposer learns them from Apply's response.
func Decode(b []byte) (Command, error) {
	r := reader{b: b}
	v, k := r.u8(), Kind(r.u8())
	if r.err != nil {
		return nil, fmt.Errorf("command: %w", r.err)
	}
	if v != CommandVersion {
		return nil, fmt.Errorf("%w: command version %d", ErrUnknownVersion, v)
	}
	var c Command
	switch k {
	case KindNewSession:
		c = NewSession{Prev: r.u64()}
	case KindDrawnSession:
		ns := NewSession{Prev: r.u64(), ID: r.u64()}
		if r.err == nil && ns.ID == 0 {
			r.err = fmt.Errorf("%w: drawn session id 0", ErrMalformed)
		}
		c = ns
	case KindBeginEpoch:
		c = BeginEpoch{Epoch: r.u64(), Primary: r.u64(), PrevCut: r.u64()}
	case KindCheckpoint:
		c = AddCheckpoint{Epoch: r.u64(), Seq: r.u64(), UnixNano: int64(r.u64())}
	case KindAddMember:
		c = AddMember{Member: r.member()}
	case KindRemoveMember:
		c = RemoveMember{ID: r.u64()}
	case KindSetRole:
		c = SetRole{ID: r.u64(), Role: Role(r.u8())}
	case KindSealEpoch:
		c = SealEpoch{Epoch: r.u64()}
	case KindDropCheckpoints:
		c = DropCheckpoints{Epoch: r.u64(), Above: r.u64()}
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCommand, k)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("command %v: %w", k, r.err)
	}
	return c, nil
}

func appendMember(b []byte, m Member) []byte {
	b = binary.BigEndian.AppendUint64(b, m.ID)
	b = append(b, byte(m.Role))
	for _, s := range [...]string{m.RaftAddr, m.StreamAddr, m.CommandAddr, m.AdminAddr} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

// reader decodes from a byte slice; the first error sticks and later reads
// return zeros, so decoders check once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) short(n int) bool {
	if r.err != nil {
		return true
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: need %d bytes, have %d", ErrMalformed, n, len(r.b))
		return true
	}
	return false
}

func (r *reader) u8() uint8 {
	if r.short(1) {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32() uint32 {
	if r.short(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if r.short(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) str() string {
	n := int(r.u8())
	if r.short(n) {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) member() Member {
	return Member{ID: r.u64(), Role: Role(r.u8()), RaftAddr: r.str(), StreamAddr: r.str(), CommandAddr: r.str(), AdminAddr: r.str()}
}
