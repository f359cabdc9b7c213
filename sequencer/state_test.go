package sequencer

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// applier is a standby: it decodes what a core published and applies
// every record to its own State.
type applier struct {
	st   *State
	seen int // packets of sink.published already applied
	pkt  wire.Packet
	rec  wire.Record
}

func (a *applier) catchUp(t testing.TB, published [][]byte) {
	t.Helper()
	for ; a.seen < len(published); a.seen++ {
		if err := wire.DecodePacket(published[a.seen], &a.pkt); err != nil {
			t.Fatalf("packet %d: %v", a.seen, err)
		}
		for a.pkt.Next(&a.rec) {
			if a.rec.Fragment() && a.rec.Offset != 0 {
				continue // a message is applied once, at its first fragment
			}
			if err := a.st.Apply(&a.rec); err != nil {
				t.Fatalf("apply seq %d: %v", a.rec.Seq, err)
			}
		}
	}
}

// TestState_AppliedStreamEqualsCoreState drives a core with a random mix
// of commands (whole, fragmented, oversized, out of order, duplicated),
// incarnations, timers (valid, malformed, too fast, over the cap),
// activation switches, forgotten senders and abandoned reassemblies; after
// every step a State fed only the published stream equals the core's
// (Snapshot bytes), and a State restored from a snapshot goes on equal.
func TestState_AppliedStreamEqualsCoreState(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		runStateEquality(t, seed, 3000)
	}
}

func runStateEquality(t *testing.T, seed uint64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	cfg := testConfig()
	cfg.MaxPacketBytes = 512
	cfg.RingBytes = 1 << 20
	cfg.MaxSenders = 5
	cfg.SenderIdleTimeout = 50 * time.Millisecond
	cfg.MaxMessageBytes = 4000
	cfg.MaxReassemblyBytes = 6000
	cfg.ReassemblyTimeout = 20 * time.Millisecond
	cfg.MaxTimersPerSender = 3
	cfg.MinTimerPeriod = time.Millisecond
	cfg.ActiveTimeout = 10 * time.Millisecond
	c, sink := newCore(t, cfg)
	std := &applier{st: NewState(cfg.MaxSenders, cfg.FirstSeq)}

	type node struct {
		account     wire.Account
		instance    uint8
		incarnation uint64
		next        uint64
	}
	var nodes []*node
	for _, a := range []string{"a", "b", "c", "d"} {
		for inst := uint8(1); inst <= 2; inst++ {
			nodes = append(nodes, &node{account: wire.MustAccount(a), instance: inst, next: 1})
		}
	}
	now := int64(0)
	buf := make([]byte, 1<<14)
	var w wire.CommandWriter
	var snapA, snapB []byte
	for step := 0; step < steps; step++ {
		now += int64(rng.IntN(int(3 * time.Millisecond)))
		switch r := rng.IntN(100); {
		case r < 10:
			c.Tick(at(now))
		case r < 12:
			now += int64(rng.IntN(int(100 * time.Millisecond)))
			c.Tick(at(now))
		default:
			n := nodes[rng.IntN(len(nodes))]
			if rng.IntN(40) == 0 { // a restart
				n.incarnation++
				n.next = 1
			}
			if _, _, ok := c.State().Sender(n.account, n.instance); !ok && n.next > 1 && rng.IntN(5) != 0 {
				// Forgotten (InternalSenderForgotten): a node starts a
				// new incarnation.
				n.incarnation++
				n.next = 1
			}
			if rng.IntN(60) == 0 { // a node that lost count
				n.next += uint64(rng.IntN(3))
			}
			if err := w.Reset(buf, n.account, n.instance, n.incarnation, testSession); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(10) == 0 && n.next > 1 { // a resend
				n.next--
			}
			for k := 1 + rng.IntN(3); k > 0; k-- {
				cm := wire.Command{CmdSeq: n.next}
				switch r := rng.IntN(100); {
				case r < 55:
					cm.Payload = make([]byte, rng.IntN(300))
				case r < 60:
					cm.Payload = make([]byte, cfg.MaxMessageBytes+1) // too large
				case r < 72: // one fragment of a larger command, maybe the last
					total := 500 + rng.IntN(4000)
					off := 0
					if rng.IntN(2) == 0 {
						off = total - 300
					}
					cm.Flags, cm.Total, cm.Offset, cm.Payload = wire.CmdFragment, uint32(total), uint32(off), make([]byte, 300)
				default:
					tr := wire.TimerRequest{ID: uint64(rng.IntN(5)), At: now + int64(rng.IntN(int(30*time.Millisecond)))}
					switch r := rng.IntN(10); {
					case r < 3:
						tr.Period = int64(time.Millisecond) * int64(1+rng.IntN(5))
					case r == 3:
						tr.Period = 1000 // below the minimum
					case r == 4:
						tr.Cancel = true
					}
					p, _ := wire.AppendTimerRequest(make([]byte, wire.TimerRequestBytes), &tr)
					cm.Flags, cm.Payload = wire.CmdTimer, p
					switch rng.IntN(20) {
					case 0:
						p[31] = 1 // malformed
					case 1:
						cm.Flags |= wire.CmdFragment
						cm.Total = uint32(len(p))
					}
				}
				if cm.Flags&wire.CmdFragment == 0 || cm.Offset+uint32(len(cm.Payload)) == cm.Total || rng.IntN(3) == 0 {
					n.next++
				}
				if w.Append(&cm) != nil {
					break
				}
			}
			if err := c.Step(at(now), w.Bytes(), 1); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		c.Flush(at(now))
		std.catchUp(t, sink.published)
		snapA = c.State().AppendSnapshot(snapA[:0])
		snapB = std.st.AppendSnapshot(snapB[:0])
		if !bytes.Equal(snapA, snapB) {
			t.Fatalf("seed %d step %d: the state applied from the stream differs from the core's (at seq %d / %d)",
				seed, step, c.State().LastSeq(), std.st.LastSeq())
		}
		if step%97 == 0 { // a standby restarted from a snapshot carries on
			var r State
			if err := r.Restore(snapB); err != nil {
				t.Fatalf("seed %d step %d: restore: %v", seed, step, err)
			}
			if !bytes.Equal(r.Snapshot(), snapB) {
				t.Fatalf("seed %d step %d: restored state encodes differently", seed, step)
			}
			std.st = &r
		}
	}
	st := c.Stats()
	t.Logf("seed %d: %d msgs, %d cmds, rejected %d (large %d, full %d, reasm %d, cap %d, timer %d, frag timer %d), forgotten %d, expired %d, switches %d, fired %d",
		seed, st.Messages, st.Commands, st.Rejected, st.RejectedTooLarge, st.RejectedSenderTableFull,
		st.RejectedReassemblyFull, st.RejectedTimerCap, st.RejectedTimerRequest, st.RejectedFragmentedTimer,
		st.SendersForgotten, st.ReassembliesExpired, st.ActivationSwitch, st.TimersFired)
	if seed == 1 && (st.RejectedTooLarge == 0 || st.RejectedSenderTableFull == 0 || st.SendersForgotten == 0 ||
		st.RejectedTimerCap == 0 || st.RejectedTimerRequest == 0 || st.RejectedFragmentedTimer == 0 || st.RejectedReassemblyFull == 0 || st.ReassembliesExpired == 0 || st.ActivationSwitch == 0 || st.TimersFired == 0 || st.Commands == 0) {
		t.Fatalf("seed 1 did not exercise every path: %+v", st)
	}
}

func TestState_ApplyRefusesGapsAndBadRecords(t *testing.T) {
	s := NewState(4, 1)
	r := wire.Record{Seq: 2, Account: acctA, Instance: 1, CmdSeq: 1}
	if err := s.Apply(&r); !errors.Is(err, ErrApplyGap) {
		t.Fatalf("gap: %v", err)
	}
	r = wire.Record{Seq: 1, Flags: wire.FlagInternal, Payload: []byte("short")}
	if err := s.Apply(&r); !errors.Is(err, ErrApplyRecord) {
		t.Fatalf("bad internal: %v", err)
	}
	if s.LastSeq() != 0 || s.Senders() != 0 {
		t.Fatalf("a refused record changed the state")
	}
	// A new sender in a full table, with no SenderForgotten before it.
	s = NewState(1, 1)
	r = wire.Record{Seq: 1, Account: acctA, Instance: 1, CmdSeq: 1}
	if err := s.Apply(&r); err != nil {
		t.Fatal(err)
	}
	before := s.Snapshot()
	for _, r := range []wire.Record{
		{Seq: 2, Account: acctB, Instance: 1, CmdSeq: 1},
		{Seq: 2, Flags: wire.FlagInternal, Account: acctB, Instance: 1, CmdSeq: 1,
			Payload: internalPayload(t, wire.Internal{Type: wire.InternalTimerSet, Account: acctB, Instance: 1, ID: 1, Value: 5})},
	} {
		if err := s.Apply(&r); !errors.Is(err, ErrApplyFull) {
			t.Fatalf("new sender in a full table: %v", err)
		}
	}
	if !bytes.Equal(s.Snapshot(), before) {
		t.Fatal("a refused record changed the state")
	}
}

func internalPayload(t *testing.T, in wire.Internal) []byte {
	t.Helper()
	b, err := wire.AppendInternal(make([]byte, wire.InternalBytes), &in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestState_RestoreRefusesCorruptSnapshots(t *testing.T) {
	c, _ := newCore(t, testConfig())
	mustStep(t, c, 1, frame(t, acctA, 1, 3, cmd(1, "x"), timerCmd(t, 2, wire.TimerRequest{ID: 1, At: 50})))
	mustStep(t, c, 1, frame(t, acctB, 2, 0, cmd(1, "y")))
	good := c.State().Snapshot()
	var s State
	if err := s.Restore(good); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Snapshot(), good) {
		t.Fatal("round trip differs")
	}
	for i := range good {
		for _, cut := range []bool{false, true} {
			b := bytes.Clone(good)
			if cut {
				b = b[:i]
			} else {
				b[i] ^= 0x80
			}
			var r State
			if err := r.Restore(b); err == nil && !bytes.Equal(r.Snapshot(), b) {
				t.Fatalf("byte %d (cut %v): accepted a snapshot that does not encode back", i, cut)
			}
		}
	}
}

// TestCore_NewPrimaryFromStandbyState: a standby that applied the old
// primary's stream becomes primary; resent commands that the old one
// sequenced are dropped, timers fire, and the standby's State goes on
// equal to the new primary's.
func TestCore_NewPrimaryFromStandbyState(t *testing.T) {
	cfg := testConfig()
	cfg.MinTimerPeriod = 0
	cfg.MaxTimerFiresPerSecond = maxTimerFiresPerSecond // a period of 1000ns
	old, sinkA := newCore(t, cfg)
	mustStep(t, old, 1000, frame(t, acctA, 1, 5, cmd(1, "a1"), cmd(2, "a2")))
	mustStep(t, old, 1000, frame(t, acctB, 1, 0, timerCmd(t, 1, wire.TimerRequest{ID: 9, At: 5000, Period: 1000})))
	old.Flush(at(2000))
	std := &applier{st: NewState(cfg.MaxSenders, cfg.FirstSeq)}
	std.catchUp(t, sinkA.published)

	cfg2 := cfg
	cfg2.Epoch = 2
	cfg2.FirstSeq = std.st.LastSeq() + 1
	if _, err := NewPrimarySinkShell(cfg2, &recordingSink{}, Takeover{State: NewState(cfg.MaxSenders, 1)}); !errors.Is(err, ErrTakeover) {
		t.Fatalf("a state at another seq: %v", err)
	}
	sinkB := &recordingSink{}
	nw, err := NewPrimarySinkShell(cfg2, sinkB, Takeover{State: std.st})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t, nw, 3000, frame(t, acctA, 1, 5, cmd(2, "a2"), cmd(3, "a3"))) // 2 is a resend
	nw.Tick(at(6000))
	nw.Flush(at(6000))
	var got []string
	for _, m := range decodeStream(t, sinkB.published, cfg.MaxPacketBytes) {
		switch {
		case m.Internal == nil:
			got = append(got, string(m.Payload))
		case m.Internal.Type == wire.InternalTimer || m.Internal.Type == wire.InternalNodeActivated || m.Internal.Type == wire.InternalIncarnation:
			got = append(got, m.Internal.Type.String())
		}
	}
	if want := []string{"a3", "timer"}; !slices.Equal(got, want) {
		t.Fatalf("new primary's stream %q, want %q", got, want)
	}
	if nw.Stats().Duplicates != 1 {
		t.Fatalf("stats %+v", nw.Stats())
	}
	std.seen = 0
	std.catchUp(t, sinkB.published)
	if !bytes.Equal(std.st.Snapshot(), nw.State().Snapshot()) {
		t.Fatal("the standby's state differs from the new primary's")
	}
}
