package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
)

// TestRaft_LoneFollowerDoesNotDeposeTheLeader: a follower cut off alone
// (as one starved of CPU on a loaded machine, or behind a broken link)
// times out and campaigns; when it is back, the leader and its term are
// those of before. With raftConfig's pre-vote the lonely campaigns never
// raise its term; without it (hashicorp/raft's PreVoteDisabled) each one
// does, and its first answer after the heal deposes the healthy leader: a
// false failover, a new epoch for nothing.
func TestRaft_LoneFollowerDoesNotDeposeTheLeader(t *testing.T) {
	tm := TestTimeouts()
	// Long enough that a loaded machine does not depose a leader on its
	// own; the cut lasts several election rounds of the follower.
	tm.Heartbeat, tm.Election, tm.LeaderLease = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	const k = 3
	var (
		rafts [k]*raft.Raft
		trans [k]*raft.InmemTransport
		conf  raft.Configuration
	)
	for i := range k {
		_, trans[i] = raft.NewInmemTransport("")
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(uint64(i + 1)), Address: trans[i].LocalAddr()})
	}
	link := func(a, b int, on bool) {
		if on {
			trans[a].Connect(trans[b].LocalAddr(), trans[b])
			trans[b].Connect(trans[a].LocalAddr(), trans[a])
		} else {
			trans[a].Disconnect(trans[b].LocalAddr())
			trans[b].Disconnect(trans[a].LocalAddr())
		}
	}
	for a := range k {
		for b := a + 1; b < k; b++ {
			link(a, b, true)
		}
	}
	for i := range k {
		rc := raftConfig(MemberConfig{ID: uint64(i + 1), Timeouts: tm, RaftLog: io.Discard})
		store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(rc, store, store, snaps, trans[i], conf); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(rc, fsm.New(), store, store, snaps, trans[i])
		if err != nil {
			t.Fatal(err)
		}
		rafts[i] = r
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	leader := func() int {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for i, r := range rafts {
				if r.State() == raft.Leader {
					return i
				}
			}
		}
		t.Fatal("no leader within 20s")
		return -1
	}
	l := leader()
	term := rafts[l].CurrentTerm()
	f := (l + 1) % k
	for i := range k {
		if i != f {
			link(f, i, false)
		}
	}
	// The follower misses the leader and campaigns several times.
	time.Sleep(8 * tm.Heartbeat)
	if rafts[f].State() == raft.Follower && rafts[f].Leader() != "" {
		t.Fatalf("follower %d still has a leader while cut off", f+1)
	}
	for i := range k {
		if i != f {
			link(f, i, true)
		}
	}
	// Back: its answers reach the leader, and it hears heartbeats again.
	for deadline := time.Now().Add(10 * time.Second); rafts[f].Leader() == "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(4 * tm.Heartbeat)
	if now := leader(); now != l || rafts[l].CurrentTerm() != term {
		t.Fatalf("leader %d of term %d before the cut, leader %d of term %d after: the lone follower deposed it",
			l+1, term, now+1, rafts[now].CurrentTerm())
	}
}
