package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/failover"
)

// TestCheckpointBound: the highest seq a majority of voters hold.
func TestCheckpointBound(t *testing.T) {
	for _, tc := range []struct {
		voters int
		held   []uint64
		want   uint64
	}{
		{3, []uint64{10, 20, 30}, 20},
		{3, []uint64{30, 5}, 5},
		{3, []uint64{30}, 0},
		{4, []uint64{40, 30, 20, 10}, 20},
		{5, []uint64{9, 9, 1, 1, 9}, 9},
		{1, []uint64{7}, 7},
		{0, nil, 0},
	} {
		if got := failover.CheckpointBound(tc.voters, tc.held); got != tc.want {
			t.Errorf("CheckpointBound(%d, %v) = %d, want %d", tc.voters, tc.held, got, tc.want)
		}
	}
}

// TestCheckpointer_RecordsOnlyWhatAQuorumHolds: the stream's acks say
// every standby holds all that was published (the test cluster's
// allAcks, as forged acks would), but the standbys hold less. After a
// transfer the new epoch's first record makes stable one above what any
// standby holds; a checkpoint is recorded only at or below what a
// majority of the voters say they hold over the peer port (issue 16's
// probe recorded one above every member). On 0727298 the checkpoint
// followed stable: "checkpoint at 4, above the 3 a majority holds".
func TestCheckpointer_RecordsOnlyWhatAQuorumHolds(t *testing.T) {
	c := newTestCluster(t, 3)
	p, to, _ := c.primaryAndOthers()
	c.transfer(p, to) // the fake standbys now hold what p published
	holds := to.node.Status().Published
	for _, m := range c.members {
		m.fol.mu.Lock()
		m.fol.stable = nil // they hold only what they are told
		m.fol.contiguous = holds
		m.fol.mu.Unlock()
	}
	p2 := p
	if _, err := to.node.TransferPrimary(context.Background(), p2.cfg.ID); err != nil {
		t.Fatal(err)
	}
	q := c.primary()
	for deadline := time.Now().Add(wait); q.node.Status().Stable <= holds; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stable %d, never above %d", q.node.Status().Stable, holds)
		}
	}
	end := time.Now().Add(50 * c.members[0].cfg.CheckpointInterval)
	for time.Now().Before(end) {
		if cp, ok := q.node.State().LastCheckpoint(); ok && cp.Seq > holds {
			t.Fatalf("checkpoint at %d, above the %d a majority holds (stable %d)", cp.Seq, holds, q.node.Status().Stable)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
