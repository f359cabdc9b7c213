package cluster

import (
	"testing"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/wire"
)

func ackFrame(t testing.TB, session uint64, epoch uint32, member, contiguous uint64) []byte {
	t.Helper()
	b, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{Session: session, Epoch: epoch,
		Flags: wire.StatusReplayer | wire.StatusStandby, Contiguous: contiguous, Delivered: contiguous, Member: member})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuorumAcks_CountsOnlyTheEpochsVoters: the Member's ack tracker takes
// acks from the frames it observes, only from the epoch's voters, for that
// epoch and session; a plain status or another session never counts.
func TestQuorumAcks_CountsOnlyTheEpochsVoters(t *testing.T) {
	e := Epoch{Session: 4, Epoch: 3, FirstSeq: 101, Self: 1,
		Members: []fsm.Member{{ID: 1, Role: fsm.Voter}, {ID: 2, Role: fsm.Voter}, {ID: 3, Role: fsm.Voter}}}
	a := NewQuorumAcks(e)
	if got := a.Stable(150); got != 100 {
		t.Fatalf("stable %d at the start, want the cut 100", got)
	}
	plain, err := wire.AppendStatus(make([]byte, wire.StatusBytes), &wire.Status{Session: 4, Epoch: 3, Contiguous: 150, Delivered: 150})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]byte{
		plain,
		ackFrame(t, 4, 2, 2, 150), // older epoch
		ackFrame(t, 5, 3, 2, 150), // another session
		ackFrame(t, 4, 3, 7, 150), // not a voter
		ackFrame(t, 4, 3, 1, 150), // the primary's own id
		{1, 2, 3},                 // garbage
	} {
		a.Observe(f, 0)
	}
	if got := a.Stable(150); got != 100 {
		t.Fatalf("stable %d after acks that must not count, want 100", got)
	}
	a.Observe(ackFrame(t, 4, 3, 3, 140), 0)
	if got := a.Stable(150); got != 140 {
		t.Fatalf("stable %d, want 140", got)
	}
	f := ackFrame(t, 4, 3, 2, 145)
	if n := testing.AllocsPerRun(100, func() { a.Observe(f, 0); a.Stable(150) }); n != 0 {
		t.Fatalf("Observe+Stable: %v allocations, want 0", n)
	}
	if got := a.Stable(150); got != 145 {
		t.Fatalf("stable %d, want 145", got)
	}
}

// TestQuorumAcks_RemovedMemberStopsCounting: a member removed during the
// epoch (SetVoters from the Raft goroutine) counts no more, at once.
func TestQuorumAcks_RemovedMemberStopsCounting(t *testing.T) {
	e := Epoch{Session: 4, Epoch: 1, FirstSeq: 1, Self: 1,
		Members: []fsm.Member{{ID: 1, Role: fsm.Voter}, {ID: 2, Role: fsm.Voter}, {ID: 3, Role: fsm.Voter}}}
	a := NewQuorumAcks(e)
	a.SetPublished(100)
	a.Observe(ackFrame(t, 4, 1, 3, 50), 0)
	if got := a.Stable(100); got != 50 {
		t.Fatalf("stable %d, want 50", got)
	}
	done := make(chan struct{})
	go func() { a.SetVoters([]uint64{1, 2, 4}); close(done) }()
	<-done
	a.Observe(ackFrame(t, 4, 1, 3, 90), 0) // removed: never counts
	if got := a.Stable(100); got != 50 {
		t.Fatalf("stable %d after an ack of a removed member, want 50", got)
	}
	a.Observe(ackFrame(t, 4, 1, 4, 70), 0) // added
	if got := a.Stable(100); got != 70 {
		t.Fatalf("stable %d, want 70 from the added member", got)
	}
}

// TestQuorumAcks_AckAbovePublishedIgnored: no standby can hold what the
// primary never published, so an ack above published (a stale report of
// another epoch's primary, a forgery) is counted and ignored, and never
// moves stable, not even once the primary has published that far.
func TestQuorumAcks_AckAbovePublishedIgnored(t *testing.T) {
	e := Epoch{Session: 4, Epoch: 1, FirstSeq: 1, Self: 1,
		Members: []fsm.Member{{ID: 1, Role: fsm.Voter}, {ID: 2, Role: fsm.Voter}, {ID: 3, Role: fsm.Voter}}}
	a := NewQuorumAcks(e)
	a.SetPublished(100)
	a.Observe(ackFrame(t, 4, 1, 2, 200), 0)
	a.Observe(ackFrame(t, 4, 1, 3, 200), 0)
	if got := a.Stable(100); got != 0 {
		t.Fatalf("stable %d after acks above published (100), want 0", got)
	}
	if got := a.Stable(300); got != 0 {
		t.Fatalf("stable %d once published passed the forged acks, want 0", got)
	}
	if got := a.BeyondPublished(); got != 2 {
		t.Fatalf("BeyondPublished %d, want 2", got)
	}
	// Up to published counts: Stable's position raised the bound too.
	a.Observe(ackFrame(t, 4, 1, 3, 250), 0)
	if got := a.Stable(300); got != 250 {
		t.Fatalf("stable %d after an ack within published, want 250", got)
	}
	if got := a.BeyondPublished(); got != 2 {
		t.Fatalf("BeyondPublished %d, want still 2", got)
	}
}
