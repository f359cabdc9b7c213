package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
)

// TestMember_CheckpointAboveEveryMemberIsDroppedNotStuck: Raft recorded a
// checkpoint above what any member holds (issue 16's probe: forged standby
// acks raised stable, then the primary died), and BeginEpoch refuses a cut
// below a checkpoint. The next leader must still begin an epoch: a quorum
// of seal answers meets every quorum, so no quorum ever held that
// checkpoint, and the core drops it in Raft (fsm.DropCheckpoints) once
// every voter answered or the seal timed out. On 0727298 every leader
// failed "cut is below a recorded checkpoint" forever ("still epoch 1
// ... no primary").
func TestMember_CheckpointAboveEveryMemberIsDroppedNotStuck(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.primary()
	st := old.node.State()
	e := st.Epoch()
	held := old.node.Status().Published + 10
	for _, m := range c.members {
		m.fol.set(held)
	}
	forged := held + 1000
	var at int64
	if cp, ok := st.LastCheckpoint(); ok {
		at = cp.UnixNano
	}
	if _, err := old.node.apply(fsm.AddCheckpoint{Epoch: e, Seq: forged, UnixNano: at + 1}); err != nil {
		t.Fatal(err)
	}
	old.stop()
	for deadline := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		var p *member
		for _, m := range c.members {
			if m != old && m.node.Role() == RolePrimary && m.node.State().Epoch() > e {
				p = m
			}
		}
		if p != nil {
			st := p.node.State()
			if st.EpochStart() != held+1 {
				t.Fatalf("epoch %d starts at %d, want %d (the cut the members hold)", st.Epoch(), st.EpochStart(), held+1)
			}
			for _, cp := range st.Checkpoints() {
				if cp.Seq == forged {
					t.Fatalf("checkpoint %d kept above the cut %d", cp.Seq, held)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			for _, m := range c.members {
				if m != old {
					t.Logf("member %d: %+v %v", m.cfg.ID, m.node.Status(), m.node.State())
				}
			}
			t.Fatalf("still epoch %d with a checkpoint at %d above every member (%d): no primary", e, forged, held)
		}
	}
}
