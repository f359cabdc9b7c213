package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
)

// TestControl_AdminOverHTTP drives the admin endpoint as `seqd admin` does:
// status from any member lists all three with one primary; a transfer
// asked of a standby is refused with ErrNotPrimary; asked of the primary,
// it hands the role over.
func TestControl_AdminOverHTTP(t *testing.T) {
	c := newTestCluster(t, 3)
	p := c.primary()
	var standby *member
	for _, m := range c.members {
		if m != p {
			standby = m
		}
	}
	ctx := context.Background()
	e := p.node.State().Epoch() // 1, unless a loaded machine made raft change leaders
	st, err := ops.FetchStatus(ctx, standby.cfg.AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Primary != p.cfg.ID || st.Epoch != e || len(st.Members) != 3 || st.Role != "standby" {
		t.Fatalf("standby's status %+v, want primary %d in epoch %d", st, p.cfg.ID, e)
	}
	// A member is primary before its first turn publishes its position
	// (a descheduled loop: Published 0 for a while): wait for it.
	waitFor(t, "the primary's first turn", func() bool { return p.node.Status().Published > 0 })
	primaries := 0
	for _, a := range ops.FetchAll(ctx, st) {
		if a.Err != nil {
			t.Fatalf("member %d: %v", a.Member.ID, a.Err)
		}
		if a.Status.Role == "primary" {
			primaries++
			if a.Status.Published == 0 {
				t.Fatalf("primary's status %+v", a.Status)
			}
		}
	}
	if primaries != 1 {
		t.Fatalf("%d primaries", primaries)
	}
	if _, err := ops.RequestTransfer(ctx, standby.cfg.AdminAddr, 0); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("transfer asked of a standby: %v, want ErrNotPrimary", err)
	}
	// Every member holds what the primary published (the quorum's
	// checkpoints say so: a cut below would be refused).
	for _, m := range c.members {
		m.fol.set(p.node.Status().Published)
	}
	h, err := ops.RequestTransfer(ctx, p.cfg.AdminAddr, standby.cfg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.To != standby.cfg.ID || h.Epoch != e+1 || c.primary() != standby {
		t.Fatalf("handover %+v", h)
	}
}

// TestSeal_OneVoterThatDoesNotAnswer: a failover state whose only voter
// is the sealed epoch's primary needs no quorum beyond that member's own
// answer (quorum 0); when it does not answer either (down), the seal
// fails with ErrNoQuorum and the leader retries, instead of panicking on
// an empty answer list. A state reachable at run time: a bootstrap whose
// leader was deposed after its first AddMember.
func TestSeal_OneVoterThatDoesNotAnswer(t *testing.T) {
	c := newTestCluster(t, 1)
	p := c.primary()
	// Member 9 is down: nothing listens on its peer address.
	gone := fsm.Member{ID: 9, Role: fsm.Voter, RaftAddr: freeAddr(t), AdminAddr: freeAddr(t), StreamAddr: freeAddr(t)}
	st := sessionState(t, []fsm.Member{gone}, fsm.BeginEpoch{Epoch: 1, Primary: gone.ID, PrevCut: 0})
	cut, peers, err := sealWith(t, p.node, st)
	if !errors.Is(err, failover.ErrNoQuorum) {
		t.Fatalf("seal of a one-voter epoch whose voter is down: cut %d peers %v err %v, want ErrNoQuorum", cut, peers, err)
	}
	t.Log(err)
}
