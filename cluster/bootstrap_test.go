package cluster

import (
	"testing"

	"github.com/seqd/seqd/fsm"
)

// TestMember_BootstrapRecordsEveryMemberBeforeEpochOne: a leader that lost
// the leadership after recording one bootstrap member leaves the others
// to the next leader, which records them before it begins epoch 1 (it
// used to skip the bootstrap once the list was not empty, and epoch 1
// began with one member: the next leader was "not a voting member", and
// once that member died no seal had a quorum). After epoch 1, or for a
// member that joined, members change only by AddMember/RemoveMember.
func TestMember_BootstrapRecordsEveryMemberBeforeEpochOne(t *testing.T) {
	ms := []fsm.Member{
		{ID: 1, RaftAddr: "127.0.0.1:1"},
		{ID: 2, RaftAddr: "127.0.0.1:2", Role: fsm.Voter},
		{ID: 3, RaftAddr: "127.0.0.1:3"},
	}
	n := &Member{cfg: MemberConfig{ID: 2, Members: ms}}
	st := fsm.Initial()
	apply := func(cmd fsm.Command) {
		t.Helper()
		var err error
		if st, err = st.Apply(st.AppliedIndex()+1, cmd); err != nil {
			t.Fatal(err)
		}
	}
	first := ms[0]
	first.Role = fsm.Voter
	apply(fsm.AddMember{Member: first}) // the first leader's only record

	got := n.bootstrapMissing(st)
	if len(got) != 2 || got[0].ID != 2 || got[1].ID != 3 || got[0].Role != fsm.Voter || got[1].Role != fsm.Voter {
		t.Fatalf("missing bootstrap members %+v, want voters 2 and 3", got)
	}
	for _, m := range got {
		apply(fsm.AddMember{Member: m})
	}
	if got := n.bootstrapMissing(st); len(got) != 0 {
		t.Fatalf("all recorded, still missing %+v", got)
	}

	// Once an epoch began, a member removed live is not added back.
	apply(fsm.NewSession{Prev: 0})
	apply(fsm.BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 0})
	apply(fsm.RemoveMember{ID: 3})
	if got := n.bootstrapMissing(st); len(got) != 0 {
		t.Fatalf("after epoch 1: %+v re-added", got)
	}
	// A member that joined bootstraps nothing.
	j := &Member{cfg: MemberConfig{ID: 4, Members: ms, Join: true}}
	if got := j.bootstrapMissing(fsm.Initial()); len(got) != 0 {
		t.Fatalf("joining member bootstraps %+v", got)
	}
}
