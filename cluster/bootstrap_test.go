package cluster

import (
	"testing"

	"github.com/seqd/seqd/cluster/failover"
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

	// The member's epoch-change core proposes, one at a time, what the
	// state lacks before epoch 1.
	proposals := func(n *Member, st *fsm.State, commit bool) []fsm.Command {
		t.Helper()
		cfg := n.failoverConfig()
		cfg.SealTimeoutNS, cfg.GraceNS, cfg.RetryNS = 1, 0, 1
		ch, err := failover.New(cfg, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []fsm.Command
		for range 10 {
			rd := ch.Ready()
			if rd.Propose == nil {
				break
			}
			out = append(out, rd.Propose)
			if _, ok := rd.Propose.(fsm.AddMember); !ok || !commit {
				break
			}
			next, err := st.Apply(st.AppliedIndex()+1, rd.Propose)
			if err != nil {
				t.Fatal(err)
			}
			st = next
			ch.Step(0, failover.Committed{State: st})
		}
		return out
	}
	got := proposals(n, st, true)
	if len(got) != 3 {
		t.Fatalf("proposals %+v, want voters 2 and 3 added, then a session", got)
	}
	for i, id := range []uint64{2, 3} {
		a, ok := got[i].(fsm.AddMember)
		if !ok || a.Member.ID != id || a.Member.Role != fsm.Voter {
			t.Fatalf("proposal %d: %+v, want voter %d added", i, got[i], id)
		}
		apply(a)
	}
	if _, ok := got[2].(fsm.NewSession); !ok {
		t.Fatalf("all recorded, then %+v, want the session", got[2])
	}

	// Once an epoch began, a member removed live is not added back.
	apply(fsm.NewSession{Prev: 0})
	apply(fsm.BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 0})
	apply(fsm.RemoveMember{ID: 3})
	if got := proposals(n, st, false); len(got) != 0 {
		t.Fatalf("after epoch 1: %+v proposed (member 3 re-added?)", got)
	}
	// A member that joined bootstraps nothing: the session first.
	j := &Member{cfg: MemberConfig{ID: 4, Members: ms, Join: true}}
	if got := proposals(j, fsm.Initial(), false); len(got) != 1 || got[0].Kind() != fsm.KindNewSession {
		t.Fatalf("joining member proposes %+v, want only a session", got)
	}
}
