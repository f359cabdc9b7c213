package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
)

// TestMember_RestartedBetweenSealAndCommitAcksNoMore: a member restarted
// after it answered a new leader's seal, before the next epoch commits,
// opens its standby sealed for that epoch: it acks nothing more of it,
// so stable cannot pass the cut. The seal is recorded in Raft before any
// member is asked (fsm.SealEpoch). Raft on bolt over TCP; here the
// survivors cannot take over, so the epoch change never commits. On
// 9764a82 the seal was volatile, and the restarted standby followed the
// stream unsealed ("restarted member's standby began following sealed
// for epoch 0, want 1"; issue 14 item 7).
func TestMember_RestartedBetweenSealAndCommitAcksNoMore(t *testing.T) {
	c := newRealTestCluster(t, 3, unitTimeouts())
	old := c.primary()
	e := uint32(old.node.State().Epoch())
	var rest []*member
	for _, m := range c.members {
		m.fol.set(old.node.Status().Published)
		if m != old {
			rest = append(rest, m)
			m.fol.mu.Lock()
			m.fol.failTakeover = true
			m.fol.mu.Unlock()
		}
	}
	old.stop()
	sealed := func(m *member) bool {
		m.fol.mu.Lock()
		defer m.fol.mu.Unlock()
		return m.fol.sealed >= e
	}
	for deadline := time.Now().Add(wait); !sealed(rest[0]) || !sealed(rest[1]); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the survivors were not sealed for epoch %d", e)
		}
	}
	r := rest[1]
	r.stop()
	self, _ := r.node.State().Member(r.cfg.ID)
	back := c.startDir(self, r.cfg.Members, r.cfg.Dir)
	for deadline := time.Now().Add(wait); ; time.Sleep(2 * time.Millisecond) {
		back.fol.mu.Lock()
		runs, at := back.fol.runs, back.fol.sealedAtRun
		back.fol.mu.Unlock()
		if runs > 0 {
			if at < e {
				t.Fatalf("restarted member's standby began following sealed for epoch %d, want %d", at, e)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member's standby never ran: %+v", back.node.Status())
		}
	}
}

// TestMember_PrimaryWhoseEpochIsSealedStops: a primary that applies the
// seal of its own epoch (recorded by a new leader) stops sequencing at
// once, before raft tells it it lost the leadership; when it is still the
// leader (a late entry of another's term), it changes the epoch itself
// rather than hold the group without a primary.
func TestMember_PrimaryWhoseEpochIsSealedStops(t *testing.T) {
	c := newTestCluster(t, 3)
	p := c.primary()
	e := p.node.State().Epoch()
	for _, m := range c.members {
		m.fol.set(p.node.Status().Published)
	}
	if _, err := p.node.apply(fsm.SealEpoch{Epoch: e}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		q := c.primary()
		if q.node.State().Epoch() > e {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still epoch %d after its seal was recorded: %+v", e, q.node.Status())
		}
	}
}
