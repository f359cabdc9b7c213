package fsm

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func member(id uint64, role Role) Member {
	return Member{ID: id, Role: role, RaftAddr: "10.0.0." + string(rune('0'+id%10)) + ":7000",
		StreamAddr: "s", CommandAddr: "c", AdminAddr: "127.0.0.1:9000"}
}

// build applies cmds to Initial() and fails the test if one is rejected.
func build(t testing.TB, cmds ...Command) *State {
	t.Helper()
	s := Initial()
	for i, c := range cmds {
		var err error
		if s, err = s.Apply(uint64(i+1), c); err != nil {
			t.Fatalf("setup command %d %#v: %v", i, c, err)
		}
	}
	return s
}

// running is a cluster of voters 1..3 and nonvoter 4 in session 1, epoch 1
// (primary 1, from seq 1) with checkpoints at 100 and 200.
var running = []Command{
	AddMember{member(1, Voter)}, AddMember{member(2, Voter)}, AddMember{member(3, Voter)},
	AddMember{member(4, Nonvoter)},
	NewSession{Prev: 0},
	BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 0},
	AddCheckpoint{Epoch: 1, Seq: 100, UnixNano: 1000},
	AddCheckpoint{Epoch: 1, Seq: 200, UnixNano: 2000},
}

func TestState_Validation(t *testing.T) {
	epoch2 := append(append([]Command{}, running...), BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 250})
	tests := []struct {
		name  string
		setup []Command
		cmd   Command
		want  error // nil: accepted
	}{
		{"new session first", nil, NewSession{Prev: 0}, nil},
		{"new session next", running, NewSession{Prev: 1}, nil},
		{"new session stale", running, NewSession{Prev: 0}, ErrStaleSession},
		{"new session ahead", running, NewSession{Prev: 2}, ErrStaleSession},
		{"new session drawn", nil, NewSession{Prev: 0, ID: 1 << 60}, nil},
		{"new session drawn next", running, NewSession{Prev: 1, ID: 2}, nil},
		{"new session drawn not after", running, NewSession{Prev: 1, ID: 1}, ErrSessionNotAfter},

		{"begin epoch without session", running[:4], BeginEpoch{Epoch: 1, Primary: 1}, ErrNoSession},
		{"begin first epoch", running[:5], BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 0}, nil},
		{"begin first epoch with a cut", running[:5], BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 5}, ErrCutWithoutPrimary},
		{"begin epoch next", running, BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 250}, nil},
		{"begin epoch cut at checkpoint", running, BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 200}, nil},
		{"begin epoch cut below checkpoint", running, BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 199}, ErrCutBelowCheckpoint},
		{"begin epoch same", running, BeginEpoch{Epoch: 1, Primary: 2, PrevCut: 250}, ErrEpochNotNext},
		{"begin epoch skip", running, BeginEpoch{Epoch: 3, Primary: 2, PrevCut: 250}, ErrEpochNotNext},
		{"begin epoch stale", epoch2, BeginEpoch{Epoch: 2, Primary: 3, PrevCut: 300}, ErrEpochNotNext},
		{"begin epoch same primary", running, BeginEpoch{Epoch: 2, Primary: 1, PrevCut: 250}, nil},
		{"begin epoch unknown primary", running, BeginEpoch{Epoch: 2, Primary: 9, PrevCut: 250}, ErrPrimaryNotVoter},
		{"begin epoch nonvoter primary", running, BeginEpoch{Epoch: 2, Primary: 4, PrevCut: 250}, ErrPrimaryNotVoter},
		{"begin epoch zero primary", running, BeginEpoch{Epoch: 2, Primary: 0, PrevCut: 250}, ErrPrimaryNotVoter},
		{"begin epoch empty epoch", epoch2, BeginEpoch{Epoch: 3, Primary: 3, PrevCut: 250}, nil},
		{"begin epoch cut before start", epoch2, BeginEpoch{Epoch: 3, Primary: 3, PrevCut: 249}, ErrCutBeforeEpochStart},
		{"begin epoch cut overflow", running, BeginEpoch{Epoch: 2, Primary: 2, PrevCut: math.MaxUint64}, ErrSeqOverflow},

		{"checkpoint without session", running[:4], AddCheckpoint{Epoch: 0, Seq: 1}, ErrNoSession},
		{"checkpoint without primary", running[:5], AddCheckpoint{Epoch: 0, Seq: 1}, ErrNoEpoch},
		{"checkpoint next", running, AddCheckpoint{Epoch: 1, Seq: 201, UnixNano: 2000}, nil},
		{"checkpoint stale epoch", epoch2, AddCheckpoint{Epoch: 1, Seq: 300, UnixNano: 3000}, ErrStaleEpoch},
		{"checkpoint future epoch", running, AddCheckpoint{Epoch: 2, Seq: 300, UnixNano: 3000}, ErrStaleEpoch},
		{"checkpoint same seq", running, AddCheckpoint{Epoch: 1, Seq: 200, UnixNano: 3000}, ErrCheckpointNotAfter},
		{"checkpoint lower seq", running, AddCheckpoint{Epoch: 1, Seq: 150, UnixNano: 3000}, ErrCheckpointNotAfter},
		{"checkpoint clock back", running, AddCheckpoint{Epoch: 1, Seq: 300, UnixNano: 1999}, ErrClockBackwards},
		{"checkpoint seq 0", running[:6], AddCheckpoint{Epoch: 1, Seq: 0}, ErrCheckpointBeforeCut},
		{"checkpoint at the cut", epoch2, AddCheckpoint{Epoch: 2, Seq: 250, UnixNano: 2500}, nil},
		{"checkpoint below the cut", epoch2, AddCheckpoint{Epoch: 2, Seq: 249, UnixNano: 2500}, ErrCheckpointBeforeCut},

		{"add member", running, AddMember{member(5, Nonvoter)}, nil},
		{"add member id 0", running, AddMember{member(0, Voter)}, ErrBadMember},
		{"add member bad role", running, AddMember{Member{ID: 5, Role: 3, RaftAddr: "x"}}, ErrBadMember},
		{"add member no raft addr", running, AddMember{Member{ID: 5, Role: Voter}}, ErrBadMember},
		{"add member long addr", running, AddMember{Member{ID: 5, Role: Voter, RaftAddr: "x", AdminAddr: strings.Repeat("a", 256)}}, ErrBadMember},
		{"add member exists", running, AddMember{Member{ID: 2, Role: Voter, RaftAddr: "new"}}, ErrMemberExists},
		{"add member address in use", running, AddMember{Member{ID: 5, Role: Voter, RaftAddr: member(2, Voter).RaftAddr}}, ErrAddressInUse},

		{"remove member", running, RemoveMember{ID: 3}, nil},
		{"remove unknown member", running, RemoveMember{ID: 9}, ErrUnknownMember},
		{"remove primary", running, RemoveMember{ID: 1}, ErrRemovePrimary},
		{"remove old primary", epoch2, RemoveMember{ID: 1}, nil},

		{"promote", running, SetRole{ID: 4, Role: Voter}, nil},
		{"demote", running, SetRole{ID: 3, Role: Nonvoter}, nil},
		{"same role", running, SetRole{ID: 3, Role: Voter}, nil},
		{"demote primary", running, SetRole{ID: 1, Role: Nonvoter}, ErrDemotePrimary},
		{"set role unknown member", running, SetRole{ID: 9, Role: Voter}, ErrUnknownMember},
		{"set role bad role", running, SetRole{ID: 3, Role: 0}, ErrBadMember},
		{"seal", running, SealEpoch{Epoch: 1}, nil},
		{"seal again", append(append([]Command{}, running...), SealEpoch{Epoch: 1}), SealEpoch{Epoch: 1}, nil},
		{"seal a future epoch", running, SealEpoch{Epoch: 2}, ErrSealNotCurrent},
		{"seal an old epoch", epoch2, SealEpoch{Epoch: 1}, ErrSealNotCurrent},
		{"seal without a primary", running[:5], SealEpoch{Epoch: 0}, ErrNoEpoch},
		{"drop checkpoints", append(append([]Command{}, running...), SealEpoch{Epoch: 1}), DropCheckpoints{Epoch: 1, Above: 150}, nil},
		{"drop checkpoints unsealed", running, DropCheckpoints{Epoch: 1, Above: 150}, ErrDropNotSealed},
		{"drop checkpoints of another epoch", append(append([]Command{}, running...), SealEpoch{Epoch: 1}), DropCheckpoints{Epoch: 2, Above: 150}, ErrStaleEpoch},
		{"drop checkpoints below the start", append(append([]Command{}, epoch2...), SealEpoch{Epoch: 2}), DropCheckpoints{Epoch: 2, Above: 249}, ErrCheckpointBeforeCut},
		{"begin epoch below a dropped checkpoint", append(append([]Command{}, running...), SealEpoch{Epoch: 1}, DropCheckpoints{Epoch: 1, Above: 150}), BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 150}, nil},
		{"begin epoch demoted primary", append(append([]Command{}, running...), SetRole{ID: 2, Role: Nonvoter}), BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 250}, ErrPrimaryNotVoter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, tt.setup...)
			before := AppendSnapshot(nil, s)
			next, err := s.Apply(1000, tt.cmd)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Apply(%#v) = %v, want %v", tt.cmd, err, tt.want)
			}
			if string(AppendSnapshot(nil, s)) != string(before) {
				t.Fatal("Apply changed its receiver")
			}
			if next.AppliedIndex() != 1000 {
				t.Fatalf("applied index %d, want 1000", next.AppliedIndex())
			}
			if err != nil {
				if !next.Equal(s.withIndex(1000)) {
					t.Fatalf("rejected command changed the state: %v -> %v", s, next)
				}
			}
			if verr := next.validate(); verr != nil {
				t.Fatalf("state after apply breaks an invariant: %v", verr)
			}
		})
	}
}

func TestState_Effects(t *testing.T) {
	s := build(t, running...)
	if s.Session() != 1 || s.Epoch() != 1 || s.Primary() != 1 || s.EpochStart() != 1 {
		t.Fatalf("running: %v", s)
	}
	s = build(t, append(append([]Command{}, running...),
		BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 250},
		AddCheckpoint{Epoch: 2, Seq: 300, UnixNano: 3000},
		RemoveMember{ID: 1},
	)...)
	if s.Epoch() != 2 || s.Primary() != 2 || s.EpochStart() != 251 {
		t.Fatalf("after epoch 2: %v", s)
	}
	if c, ok := s.Cut(1); !ok || c != (Cut{Session: 1, Epoch: 1, Primary: 1, Last: 250}) {
		t.Fatalf("cut of epoch 1 = %+v %v", c, ok)
	}
	if c, ok := s.Cut(0); !ok || c.Last != 0 || c.Primary != 0 {
		t.Fatalf("cut of epoch 0 = %+v %v", c, ok)
	}
	if _, ok := s.Cut(2); ok {
		t.Fatal("the current epoch has a cut")
	}
	if cp, _ := s.LastCheckpoint(); cp != (Checkpoint{Seq: 300, UnixNano: 3000}) {
		t.Fatalf("last checkpoint %+v", cp)
	}
	if _, ok := s.Member(1); ok || len(s.Members()) != 3 {
		t.Fatalf("members after remove: %+v", s.Members())
	}
	// A new session: ids grow, seq restarts at 1, checkpoints go, epoch
	// and primary stay, cuts stay with their session.
	s2, err := s.Apply(99, NewSession{Prev: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Session() != 2 || s2.EpochStart() != 1 || len(s2.Checkpoints()) != 0 || s2.Epoch() != 2 || s2.Primary() != 2 || len(s2.Cuts()) != 2 {
		t.Fatalf("after new session: %v", s2)
	}
	if _, err := s2.Apply(100, BeginEpoch{Epoch: 3, Primary: 3, PrevCut: 0}); err != nil {
		t.Fatalf("empty epoch in the new session: %v", err)
	}
}

func TestState_BoundedTables(t *testing.T) {
	s := build(t, running...)
	var err error
	for i := range uint64(MaxCheckpoints + 10) {
		if s, err = s.Apply(100+i, AddCheckpoint{Epoch: 1, Seq: 1000 + i, UnixNano: 5000}); err != nil {
			t.Fatal(err)
		}
	}
	cps := s.Checkpoints()
	if len(cps) != MaxCheckpoints || cps[len(cps)-1].Seq != 1000+MaxCheckpoints+9 || cps[0].Seq != 1010 {
		t.Fatalf("checkpoints: %d, first %+v", len(cps), cps[0])
	}
	for e := uint64(2); e < MaxCuts+10; e++ {
		if s, err = s.Apply(1000+e, BeginEpoch{Epoch: e, Primary: 1 + e%3, PrevCut: 2000}); err != nil {
			t.Fatal(err)
		}
	}
	cuts := s.Cuts()
	if len(cuts) != MaxCuts || cuts[0].Epoch != s.Epoch()-MaxCuts {
		t.Fatalf("cuts: %d, first epoch %d, current %d", len(cuts), cuts[0].Epoch, s.Epoch())
	}
	for i := uint64(10); len(s.Members()) < MaxMembers; i++ {
		if s, err = s.Apply(5000+i, AddMember{Member{ID: i, Role: Nonvoter, RaftAddr: "n" + string(rune(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply(9999, AddMember{Member{ID: 9999, Role: Nonvoter, RaftAddr: "full"}}); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("add to a full table: %v", err)
	}
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
}

// TestState_ReadersCopies checks that what readers get cannot change the
// published state.
func TestState_ReadersCopies(t *testing.T) {
	s := build(t, running...)
	s.Members()[0].ID = 77
	s.Checkpoints()[0].Seq = 77
	if m, _ := s.Member(1); m.ID != 1 {
		t.Fatal("Members returned the state's own slice")
	}
	if cp := s.Checkpoints(); cp[0].Seq != 100 {
		t.Fatal("Checkpoints returned the state's own slice")
	}
}

// TestState_NewSessionDrawnID: a session drawn at bootstrap is the
// session, not Prev+1 (every cluster used to be session 1), and a later
// drawn one must be above it.
func TestState_NewSessionDrawnID(t *testing.T) {
	s, err := Initial().Apply(1, NewSession{Prev: 0, ID: 1_700_000_000_123_456_789})
	if err != nil || s.Session() != 1_700_000_000_123_456_789 {
		t.Fatalf("session %d, %v; want the drawn id 1700000000123456789", s.Session(), err)
	}
	if s, err = s.Apply(2, NewSession{Prev: s.Session()}); err != nil || s.Session() != 1_700_000_000_123_456_790 {
		t.Fatalf("undrawn next session %d, %v; want 1700000000123456790", s.Session(), err)
	}
	b, _ := Encode(NewSession{Prev: 3, ID: 4})
	clear(b[len(b)-8:]) // an id of 0 written out
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("decode of id 0 written out: %v, want ErrMalformed", err)
	}
}
