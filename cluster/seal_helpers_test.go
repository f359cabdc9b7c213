package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
)

// sealWith runs the member's epoch-change core on st through its seal
// (the seal recorded at once, no Raft) with the member's own seal
// transport (requestSeals: in process for itself, the peer port for the
// others), and returns the cut and the fetch sources (peer addresses,
// best first) the core decided, or why the attempt failed.
func sealWith(t *testing.T, n *Member, st *fsm.State) (uint64, []string, error) {
	t.Helper()
	ch, err := failover.New(n.failoverConfig(), st, n.mono())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replies := make(chan failover.SealReply, fsm.MaxMembers)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		rd := ch.Ready()
		switch {
		case rd.Failed != nil:
			return 0, nil, rd.Failed
		case rd.RecordSeal != 0:
			ch.Step(n.mono(), failover.SealRecorded{Epoch: rd.RecordSeal})
			continue
		case len(rd.Seal) > 0:
			n.requestSeals(ctx, rd.Seal, replies)
			continue
		case rd.Fetch != nil:
			var peers []string
			for _, m := range rd.Fetch.Peers {
				peers = append(peers, m.StreamAddr)
			}
			return rd.Fetch.Cut, peers, nil
		case rd.TakeOver != nil:
			return rd.TakeOver.Cut, nil, nil
		case !rd.Empty():
			t.Fatalf("unexpected %+v", rd)
		}
		select {
		case r := <-replies:
			ch.Step(n.mono(), r)
		case <-time.After(time.Millisecond):
		}
		ch.Tick(n.mono())
	}
	t.Fatal("the seal did not end")
	return 0, nil, nil
}
