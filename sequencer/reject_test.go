package sequencer

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// events renders the stream: "cmd A/I#c", "rejected A/I#c reason inc=N",
// "forgotten A/I", "activated A/I", "incarnation A/I N", "timer-set A/I#c"
// (the session and epoch starts are left out).
func events(t testing.TB, sink *recordingSink, cfg Config) []string {
	t.Helper()
	var out []string
	for _, m := range decodeStream(t, sink.published, cfg.MaxPacketBytes) {
		in := m.Internal
		switch {
		case in == nil:
			out = append(out, fmt.Sprintf("cmd %v/%d#%d", m.Account, m.Instance, m.CmdSeq))
		case in.Type == wire.InternalRejected:
			if m.Flags != wire.FlagInternal || m.Account != in.Account || m.Instance != in.Instance || m.CmdSeq != in.ID {
				t.Fatalf("seq %d: rejection header %v/%d#%d flags %b, payload %+v", m.Seq, m.Account, m.Instance, m.CmdSeq, m.Flags, in)
			}
			out = append(out, fmt.Sprintf("rejected %v/%d#%d %d inc=%d", in.Account, in.Instance, in.ID, in.Value, in.Extra))
		case in.Type == wire.InternalSenderForgotten:
			out = append(out, fmt.Sprintf("forgotten %v/%d", in.Account, in.Instance))
		case in.Type == wire.InternalNodeActivated:
			out = append(out, fmt.Sprintf("activated %v/%d", in.Account, in.Instance))
		case in.Type == wire.InternalIncarnation:
			out = append(out, fmt.Sprintf("incarnation %v/%d %d", in.Account, in.Instance, in.Value))
		case in.Type == wire.InternalTimerSet:
			out = append(out, fmt.Sprintf("timer-set %v/%d#%d", in.Account, in.Instance, m.CmdSeq))
		}
	}
	return out
}

func rejected(a string, inst uint8, cmdSeq uint64, r wire.RejectReason, inc int) string {
	return fmt.Sprintf("rejected %s/%d#%d %d inc=%d", a, inst, cmdSeq, r, inc)
}

// TestCore_OversizedCommandRejectedOthersGoOn: a command over
// MaxMessageBytes used to drop its whole frame (the node resent it forever
// and the sender's later commands were stuck behind it). Now it alone is
// rejected in the stream, its cmdSeq is used up, and the rest go on.
func TestCore_OversizedCommandRejectedOthersGoOn(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 100
	c, sink := newCore(t, cfg)
	big := strings.Repeat("x", 101)
	mustStep(t, c, 1, frame(t, acctA, 1, 7, cmd(1, "a"), cmd(2, big), cmd(3, "c")))
	mustStep(t, c, 2, frame(t, acctA, 1, 7, cmd(2, big), cmd(3, "c"), cmd(4, "d"))) // a resend
	mustStep(t, c, 3, frame(t, acctA, 1, 7, wire.Command{CmdSeq: 5, Flags: wire.CmdFragment, Total: 101, Payload: []byte("x")}, cmd(6, "f")))
	c.Flush(at(4))
	want := []string{"activated alice/1", "incarnation alice/1 7", "cmd alice/1#1",
		rejected("alice", 1, 2, wire.RejectTooLarge, 7), "cmd alice/1#3", "cmd alice/1#4",
		rejected("alice", 1, 5, wire.RejectTooLarge, 7), "cmd alice/1#6"}
	if got := events(t, sink, cfg); !slices.Equal(got, want) {
		t.Fatalf("stream\n%q\nwant\n%q", got, want)
	}
	if st := c.Stats(); st.Malformed != 0 || st.Rejected != 2 || st.RejectedTooLarge != 2 || st.Commands != 4 || st.Duplicates != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCore_TimerRequestsRejected: a malformed, fragmented or too fast
// timer request is rejected alone (it used to drop the frame as
// malformed), and one sender cannot hold more than MaxTimersPerSender
// timers (it used to be able to set 20 000).
func TestCore_TimerRequestsRejected(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTimersPerSender = 3
	cfg.MinTimerPeriod = time.Millisecond
	c, sink := newCore(t, cfg)
	bad := timerCmd(t, 1, wire.TimerRequest{ID: 1, At: 5})
	bad.Payload[30] = 1 // a reserved byte set
	frag := timerCmd(t, 2, wire.TimerRequest{ID: 1, At: 5})
	frag.Flags |= wire.CmdFragment
	frag.Total = wire.TimerRequestBytes
	mustStep(t, c, 1, frame(t, acctA, 1, 0, bad, frag,
		timerCmd(t, 3, wire.TimerRequest{ID: 1, At: 5, Period: int64(time.Millisecond) - 1}), cmd(4, "after")))
	var cmds []wire.Command
	for i := uint64(0); i < 20000; i++ {
		cmds = append(cmds, timerCmd(t, 5+i, wire.TimerRequest{ID: i, At: 1 << 40, Period: int64(time.Second)}))
	}
	cmds = append(cmds, timerCmd(t, 20005, wire.TimerRequest{ID: 2, At: 1 << 41})) // replacing one at the cap is fine
	for len(cmds) > 0 {
		n := min(len(cmds), 1000)
		mustStep(t, c, 2, frame(t, acctA, 1, 0, cmds[:n]...))
		cmds = cmds[n:]
	}
	c.Flush(at(3))
	got := events(t, sink, cfg)
	want := []string{"activated alice/1", rejected("alice", 1, 1, wire.RejectTimerRequest, 0),
		rejected("alice", 1, 2, wire.RejectFragmentedTimer, 0), rejected("alice", 1, 3, wire.RejectTimerRequest, 0),
		"cmd alice/1#4", "timer-set alice/1#5", "timer-set alice/1#6", "timer-set alice/1#7", rejected("alice", 1, 8, wire.RejectTimerCap, 0)}
	if !slices.Equal(got[:len(want)], want) {
		t.Fatalf("stream\n%q\nwant\n%q", got[:len(want)], want)
	}
	if last := got[len(got)-1]; last != "timer-set alice/1#20005" {
		t.Fatalf("last record %q, want the replacement of timer 2", last)
	}
	if n := c.State().Timers(); n != 3 {
		t.Fatalf("%d timers scheduled, want 3", n)
	}
	if st := c.Stats(); st.RejectedTimerCap != 19997 || st.RejectedTimerRequest != 2 || st.RejectedFragmentedTimer != 1 || st.Malformed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCore_FrameWithoutValidCommandMakesNoSender: a frame whose commands
// are all ahead of the next one used to take a sender slot and put an
// activation record in the stream. Only a record creates an entry now.
func TestCore_FrameWithoutValidCommandMakesNoSender(t *testing.T) {
	cfg := testConfig()
	c, sink := newCore(t, cfg)
	next := c.NextSeq()
	mustStep(t, c, 1, frame(t, acctA, 1, 3, cmd(5, "ahead"), cmd(6, "ahead")))
	c.Flush(at(2))
	if c.NextSeq() != next || c.State().Senders() != 0 || len(events(t, sink, cfg)) != 0 {
		t.Fatalf("a frame with no valid command changed the stream or the table: %q, %d senders", events(t, sink, cfg), c.State().Senders())
	}
	if st := c.Stats(); st.OutOfOrder != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCore_FullSenderTable: a new sender in a full table replaces the
// least recently active one once that one is silent for
// SenderIdleTimeout (InternalSenderForgotten, before the newcomer's
// records), and is rejected before that; known senders are served
// throughout. The forgotten sender comes back with a new incarnation.
func TestCore_FullSenderTable(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSenders = 2
	cfg.SenderIdleTimeout = time.Second
	c, sink := newCore(t, cfg)
	carol := wire.MustAccount("carol")
	mustStep(t, c, 1, frame(t, acctA, 1, 0, cmd(1, "a")))
	mustStep(t, c, 2, frame(t, acctB, 1, 0, cmd(1, "b")))
	mustStep(t, c, 3, frame(t, carol, 1, 0, cmd(1, "c"), cmd(2, "c"))) // too early: both rejected
	mustStep(t, c, 4, frame(t, acctB, 1, 0, cmd(2, "b")))              // bob active again: alice is the oldest
	s := int64(time.Second)
	mustStep(t, c, s+2, frame(t, carol, 1, 0, cmd(1, "c")))   // alice silent 1s: forgotten
	mustStep(t, c, s+3, frame(t, acctA, 1, 0, cmd(2, "a")))   // alice, unaware: dropped as out of order
	mustStep(t, c, 2*s+5, frame(t, acctA, 1, 1, cmd(1, "a"))) // a new incarnation: bob (oldest) forgotten
	c.Flush(at(2*s + 6))
	want := []string{
		"activated alice/1", "cmd alice/1#1", "activated bob/1", "cmd bob/1#1",
		rejected("carol", 1, 1, wire.RejectSenderTableFull, 0), rejected("carol", 1, 2, wire.RejectSenderTableFull, 0),
		"cmd bob/1#2",
		"forgotten alice/1", "activated carol/1", "cmd carol/1#1",
		"forgotten bob/1", "activated alice/1", "incarnation alice/1 1", "cmd alice/1#1",
	}
	if got := events(t, sink, cfg); !slices.Equal(got, want) {
		t.Fatalf("stream\n%q\nwant\n%q", got, want)
	}
	if st := c.Stats(); st.SendersForgotten != 2 || st.RejectedSenderTableFull != 2 || st.OutOfOrder != 1 || c.State().Senders() != 2 {
		t.Fatalf("stats %+v, %d senders", st, c.State().Senders())
	}
}

// TestCore_VanishedSendersFreeTheirReassemblies: four senders that died
// mid-command used to pin the budget forever. Their reassemblies are
// dropped after ReassemblyTimeout on the monotonic clock (the wall clock
// here stands still), and a fifth sender's command then fits. (The four
// sent nearly all of their 1 MiB: the budget is charged by the bytes
// that arrived.)
func TestCore_VanishedSendersFreeTheirReassemblies(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 1 << 12 * cfg.MaxPacketBytes
	cfg.MaxMessageBytes = 1 << 20
	cfg.MaxReassemblyBytes = 4 << 20
	cfg.ReassemblyTimeout = time.Second
	c, sink := newCore(t, cfg)
	big := make([]byte, 1<<20)
	for i, name := range []string{"d1", "d2", "d3", "d4"} {
		fs := fragFrames(t, wire.MustAccount(name), 1, big)
		for _, f := range fs[:len(fs)-1] {
			mustStepAt(t, c, Time{Mono: int64(i), Wall: 0}, f)
		}
	}
	erin := wire.MustAccount("erin")
	for _, f := range fragFrames(t, erin, 1, big)[:2] { // the budget is full
		mustStepAt(t, c, Time{Mono: 10, Wall: 0}, f)
	}
	c.Tick(Time{Mono: int64(time.Second) / 2, Wall: 0})
	for _, f := range fragFrames(t, erin, 2, big)[:2] { // still full
		mustStepAt(t, c, Time{Mono: int64(time.Second) / 2, Wall: 0}, f)
	}
	c.Tick(Time{Mono: 2 * int64(time.Second), Wall: 0})
	payload := bytes.Repeat([]byte("e"), 1<<20)
	for _, f := range fragFrames(t, erin, 3, payload) {
		mustStepAt(t, c, Time{Mono: 2 * int64(time.Second), Wall: 0}, f)
	}
	c.Flush(Time{Mono: 2 * int64(time.Second), Wall: 0})
	want := []string{"activated erin/1", rejected("erin", 1, 1, wire.RejectReassemblyFull, 0),
		rejected("erin", 1, 2, wire.RejectReassemblyFull, 0), "cmd erin/1#3"}
	if got := events(t, sink, cfg); !slices.Equal(got, want) {
		t.Fatalf("stream\n%q\nwant\n%q", got, want)
	}
	if st := c.Stats(); st.ReassembliesExpired != 4 || st.RejectedReassemblyFull != 2 {
		t.Fatalf("stats %+v", st)
	}
	if c.asm.reserved != 0 || len(c.asm.index) != 0 {
		t.Fatalf("%d bytes still reserved by %d reassemblies", c.asm.reserved, len(c.asm.index))
	}
}

// TestCore_RejectionAllocatesNothing: the rejection path is a hot path
// too (a misbehaving node resends).
func TestCore_RejectionAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 100
	c, _ := newCore(t, cfg)
	big := make([]byte, 200)
	seq := uint64(0)
	var w wire.CommandWriter
	buf := make([]byte, 4096)
	step := func() {
		seq++
		if err := w.Reset(buf, acctA, 1, 0, testSession); err != nil {
			t.Fatal(err)
		}
		c1 := wire.Command{CmdSeq: seq, Payload: big}
		if err := w.Append(&c1); err != nil {
			t.Fatal(err)
		}
		if err := c.Step(at(int64(seq)), w.Bytes(), 1); err != nil {
			t.Fatal(err)
		}
		if seq%16 == 0 {
			c.Flush(at(int64(seq)))
		}
	}
	step()
	if allocs := testing.AllocsPerRun(2000, step); allocs != 0 {
		t.Fatalf("%.1f allocations per rejected command", allocs)
	}
	if st := c.Stats(); st.RejectedTooLarge != 2002 {
		t.Fatalf("stats %+v", st)
	}
}

// TestState_SnapshotAllocatesNothing: the simulator snapshots after every
// step into reused buffers.
func TestState_SnapshotAllocatesNothing(t *testing.T) {
	c, _ := newCore(t, testConfig())
	mustStep(t, c, 1, frame(t, acctA, 1, 3, cmd(1, "x"), timerCmd(t, 2, wire.TimerRequest{ID: 1, At: 50})))
	buf := c.State().AppendSnapshot(nil)
	if allocs := testing.AllocsPerRun(100, func() { buf = c.State().AppendSnapshot(buf[:0]) }); allocs != 0 {
		t.Fatalf("%.1f allocations per snapshot", allocs)
	}
}
