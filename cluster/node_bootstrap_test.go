package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
)

// TestMember_PartialBootstrapCompleted: a bootstrap leader deposed after
// its first AddMember leaves the failover state with one of the three
// configured members and no session. The next leader adds the members
// still missing (not only when the table is empty) before it starts the
// session, so every configured member is a voter of epoch 1.
func TestMember_PartialBootstrapCompleted(t *testing.T) {
	c := &testCluster{t: t, timeouts: unitTimeouts()}
	ms := memberList(t, 3)
	for _, m := range ms {
		c.open(m, ms, false, t.TempDir())
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.stop()
		}
	})
	// The deposed leader's one committed AddMember, proposed by whichever
	// member raft elects before any member runs the roles.
	deadline := time.Now().Add(wait)
	for {
		var leader *member
		for _, m := range c.members {
			if m.node.IsLeader() {
				leader = m
			}
		}
		if leader != nil {
			if _, err := leader.node.apply(fsm.AddMember{Member: ms[0]}); err == nil {
				break
			} else {
				t.Logf("member %d: %v", leader.cfg.ID, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no raft leader took the first AddMember")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, m := range c.members {
		m.run()
	}
	p := c.primary()
	for _, m := range c.members {
		st := m.node.State()
		if st.Session() == 0 || st.Session() != p.node.State().Session() || len(st.Members()) != 3 {
			t.Fatalf("member %d: state %v, want the primary's session with the 3 configured members", m.cfg.ID, st)
		}
		for _, want := range ms {
			got, ok := st.Member(want.ID)
			if !ok || got != want {
				t.Fatalf("member %d: member %d is %+v (present %v), want %+v", m.cfg.ID, want.ID, got, ok, want)
			}
		}
	}
	t.Logf("primary %d in epoch %d", p.cfg.ID, p.node.State().Epoch())
}
