package sequencer

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestCore_HotHotFencedIncarnationStaysFenced is the simulator's seed 12
// (hothot, 2000 commands) in the core: instance 1 is cut off and
// replaced by its partner; the window it resends when the cut heals is
// rejected NotActive; the partner, far behind, sends nothing and is
// replaced in turn by instance 1, which has not read of the first switch
// yet and goes on sending under the same incarnation. Those later
// commands must be rejected too (the incarnation is fenced from its
// first NotActive rejection on): sequenced, their ids would lie above
// the ones rejected, and when instance 1 fences itself and resends the
// rejected ones under a new incarnation the id dedupe would drop them
// as the partner's copies. They were never sequenced by anyone: lost.
// (Before the fix: "ids [10 11 14], want [10 11 12 13 14]".) A new
// primary taking over from a standby's State holds the fence too.
func TestCore_HotHotFencedIncarnationStaysFenced(t *testing.T) {
	const ms = int64(time.Millisecond)
	cfg := testConfig()
	cfg.ActiveTimeout = 20 * time.Millisecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, hotFrame(t, acctA, 1, 7))
	mustStep(t, c, 0, hotFrame(t, acctA, 2, 20))
	mustStep(t, c, ms, hotFrame(t, acctA, 1, 7, hotCmd(1, 10, "a"), hotCmd(2, 11, "b")))
	// Instance 1 is cut off; its partner heartbeats and takes over.
	for now := 2 * ms; now <= 22*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 2, 20))
		c.Tick(at(now))
	}
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d after instance 1's silence, want 2", inst)
	}
	// The cut heals: instance 1 resends its window, still believing it
	// is active. Rejected: it is not.
	mustStep(t, c, 23*ms, hotFrame(t, acctA, 1, 7, hotCmd(3, 12, "c"), hotCmd(4, 13, "d")))
	// A standby's State at this point, for a takeover below.
	c.Flush(at(23 * ms))
	cut := c.State().LastSeq()
	standby := stateAt(t, cfg, sink.published, cut)
	// The partner sends nothing; instance 1 heartbeats and is active
	// again before it has read of the first switch.
	for now := 24 * ms; now <= 44*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 1, 7))
		c.Tick(at(now))
	}
	if inst, _ := c.State().Active(acctA); inst != 1 {
		t.Fatalf("active %d after the partner's silence, want 1", inst)
	}
	// Its next command of incarnation 7 (the answer to a later order).
	mustStep(t, c, 45*ms, hotFrame(t, acctA, 1, 7, hotCmd(5, 14, "e")))
	// It reads of the switch, fences itself and resends what was not in
	// the stream under a new incarnation.
	mustStep(t, c, 46*ms, hotFrame(t, acctA, 1, 8, hotCmd(1, 12, "c"), hotCmd(2, 13, "d"), hotCmd(3, 14, "e")))
	c.Flush(at(47 * ms))
	ms1 := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	if ids := checkFenced(t, ms1, acctA); !slices.Equal(ids, []uint64{10, 11, 12, 13, 14}) {
		t.Fatalf("ids %v, want [10 11 12 13 14]", ids)
	}
	if got, want := rejections(ms1), []string{"1/3:8", "1/4:8", "1/5:8"}; !slices.Equal(got, want) {
		t.Fatalf("rejections %q, want %q (instance/cmdSeq:reason)", got, want)
	}
	if _, hot := standby.HotHot(acctA, 1); !hot || !fencedInstance(standby, acctA, 1) {
		t.Fatal("instance 1's incarnation is not fenced after its NotActive rejections")
	}
	if fencedInstance(c.State(), acctA, 1) {
		t.Fatal("the new incarnation is still fenced")
	}
	st := stateAt(t, cfg, sink.published, c.State().LastSeq())
	if !bytes.Equal(st.Snapshot(), c.State().Snapshot()) {
		t.Fatal("a State applied from the stream differs from the core's")
	}

	// A failover right after the rejections: the new primary restores a
	// standby's snapshot, instance 1 is made active again, and its
	// incarnation 7 is still fenced there.
	var restored State
	if err := restored.Restore(standby.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if !fencedInstance(&restored, acctA, 1) {
		t.Fatal("the restored State lost the fence")
	}
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq, ncfg.StartTime = 2, cut+1, c.LastTime()
	n, nsink := newCoreWith(t, ncfg, Takeover{State: &restored})
	if _, err := n.Activate(at(50*ms), acctA, 1); err != nil {
		t.Fatal(err)
	}
	mustStep(t, n, 51*ms, hotFrame(t, acctA, 1, 7, hotCmd(5, 14, "e")))
	n.Flush(at(52 * ms))
	ms2 := decodeStream(t, nsink.published, cfg.MaxPacketBytes)
	if ids := checkFenced(t, ms2, acctA); len(ids) != 0 {
		t.Fatalf("the new primary sequenced ids %v of the fenced incarnation", ids)
	}
	if got, want := rejections(ms2), []string{"1/5:8"}; !slices.Equal(got, want) {
		t.Fatalf("new primary: rejections %q, want %q", got, want)
	}
}

// fencedInstance reports whether the State holds instance's current
// incarnation of account a as fenced.
func fencedInstance(s *State, a wire.Account, instance uint8) bool {
	for _, p := range s.HotHotPairs() {
		if p.Account != a {
			continue
		}
		for _, in := range p.Instances {
			if in.Instance == instance {
				return in.Fenced
			}
		}
	}
	return false
}

// TestState_SnapshotFencedAndVersion2: a fenced incarnation survives a
// snapshot round trip (version 3); a version 2 snapshot (no fenced bit)
// is still read, as no incarnation fenced, and one that sets the bit it
// did not have is refused, as is a fenced sender that is not hot-hot.
func TestState_SnapshotFencedAndVersion2(t *testing.T) {
	cfg := testConfig()
	c, sink := newCore(t, cfg)
	mustStep(t, c, 1, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 2, hotFrame(t, acctA, 2, 20, hotCmd(1, 5, "x"))) // the passive: fenced
	mustStep(t, c, 3, frame(t, acctB, 1, 30, cmd(1, "plain")))
	c.Flush(at(4))
	st := stateAt(t, cfg, sink.published, c.State().LastSeq())
	snap := st.Snapshot()
	if !bytes.Equal(snap, c.State().Snapshot()) || !fencedInstance(st, acctA, 2) || fencedInstance(st, acctA, 1) {
		t.Fatal("the fence is not in the State applied from the stream")
	}
	var r State
	if err := r.Restore(snap); err != nil || !bytes.Equal(r.Snapshot(), snap) || !fencedInstance(&r, acctA, 2) {
		t.Fatalf("version 3 round trip: %v", err)
	}
	// Senders in index order: acctA/1, acctA/2, acctB/1. A sender's flags
	// byte follows its account (8 bytes) and instance (1 byte).
	flagsAt := func(i int) int { return snapHeaderBytes + i*snapSenderBytes + 9 }
	if snap[4] != 3 || snap[flagsAt(0)] != snapHotHot || snap[flagsAt(1)] != snapHotHot|snapFenced || snap[flagsAt(2)] != 0 {
		t.Fatalf("layout: version %d, flags %d %d %d", snap[4], snap[flagsAt(0)], snap[flagsAt(1)], snap[flagsAt(2)])
	}
	v2 := bytes.Clone(snap)
	v2[4] = 2
	if err := r.Restore(v2); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("version 2 with a fenced bit: %v, want ErrSnapshot", err)
	}
	v2[flagsAt(1)] = snapHotHot
	if err := r.Restore(v2); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	if fencedInstance(&r, acctA, 2) {
		t.Fatal("a version 2 snapshot restored as fenced")
	}
	if _, hot := r.HotHot(acctA, 2); !hot {
		t.Fatal("a version 2 snapshot lost the hot-hot flag")
	}
	want := bytes.Clone(snap)
	want[flagsAt(1)] = snapHotHot
	if !bytes.Equal(r.Snapshot(), want) {
		t.Fatal("a version 2 snapshot does not restore as the same State unfenced")
	}
	bad := bytes.Clone(snap)
	bad[flagsAt(2)] = snapFenced
	if err := r.Restore(bad); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("a fenced sender that is not hot-hot: %v, want ErrSnapshot", err)
	}
	bad[flagsAt(2)] = 4
	if err := r.Restore(bad); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("an unknown flag: %v, want ErrSnapshot", err)
	}
}
