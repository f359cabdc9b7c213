package sequencer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// hotFrame builds a hot-hot instance's command frame; with no commands it
// is the instance's heartbeat.
func hotFrame(t testing.TB, a wire.Account, instance uint8, incarnation uint64, cmds ...wire.Command) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 1<<16), a, instance, incarnation, testSession); err != nil {
		t.Fatal(err)
	}
	w.SetHotHot()
	for i := range cmds {
		if err := w.Append(&cmds[i]); err != nil {
			t.Fatalf("append command %d: %v", i, err)
		}
	}
	return bytes.Clone(w.Bytes())
}

func hotCmd(seq, id uint64, payload string) wire.Command {
	return wire.Command{CmdSeq: seq, ID: id, Payload: []byte(payload)}
}

// checkFenced replays ms and fails when a command of account a enters the
// stream from an instance that is not the active one at that point (or
// when an id is sequenced twice). It returns the ids in stream order.
func checkFenced(t *testing.T, ms []msg, a wire.Account) []uint64 {
	t.Helper()
	active := -1
	var ids []uint64
	for _, m := range ms {
		switch {
		case m.Internal != nil && m.Internal.Account == a && m.Internal.Type == wire.InternalNodeActivated:
			active = int(m.Internal.Instance)
		case m.Internal != nil && m.Internal.Account == a && m.Internal.Type == wire.InternalNodeDeactivated:
			if active == int(m.Internal.Instance) {
				active = -1
			}
		case m.Internal == nil && m.Account == a:
			if int(m.Instance) != active {
				t.Fatalf("seq %d: command of %v/%d entered the stream while the active instance is %d", m.Seq, a, m.Instance, active)
			}
			if slices.Contains(ids, m.CmdSeq) {
				t.Fatalf("seq %d: id %d sequenced twice", m.Seq, m.CmdSeq)
			}
			ids = append(ids, m.CmdSeq)
		}
	}
	return ids
}

func rejections(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Internal != nil && m.Internal.Type == wire.InternalRejected {
			out = append(out, fmt.Sprintf("%d/%d:%d", m.Internal.Instance, m.Internal.ID, m.Internal.Value))
		}
	}
	return out
}

// TestCore_HotHotFencedAndDeduped: the first instance heard is active;
// the passive's commands are rejected (RejectNotActive, each in the
// stream) and fence its incarnation (it comes back under a new one, as
// a node does when it reads that it is passive), a force-passive
// switches to the live partner, the old active's later commands are
// fenced, and the new active's copies of ids already sequenced are
// rejected as duplicates: each id enters the stream once, and never from
// an instance that is not active.
func TestCore_HotHotFencedAndDeduped(t *testing.T) {
	cfg := testConfig()
	cfg.ActiveTimeout = 50 * time.Millisecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 1, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 2, hotFrame(t, acctA, 2, 20))
	if inst, ok := c.State().Active(acctA); !ok || inst != 1 {
		t.Fatalf("active %d %v, want instance 1", inst, ok)
	}
	mustStep(t, c, 3, hotFrame(t, acctA, 1, 10, hotCmd(1, 100<<16, "a"), hotCmd(2, 100<<16|1, "b")))
	mustStep(t, c, 4, hotFrame(t, acctA, 2, 20, hotCmd(1, 100<<16, "a"))) // a passive that sent: fenced
	mustStep(t, c, 4, hotFrame(t, acctA, 2, 21))                          // its next incarnation
	if _, err := c.ForcePassive(at(5), acctA, 2); !errors.Is(err, ErrNotActive) {
		t.Fatalf("force-passive of the passive: %v, want ErrNotActive", err)
	}
	if _, err := c.ForcePassive(at(5), acctA, 1); err != nil {
		t.Fatalf("force-passive: %v", err)
	}
	mustStep(t, c, 6, hotFrame(t, acctA, 1, 10, hotCmd(3, 101<<16, "c"))) // the old active, still sending
	mustStep(t, c, 7, hotFrame(t, acctA, 2, 21, hotCmd(1, 100<<16|1, "b"), hotCmd(2, 101<<16, "c")))
	c.Flush(at(8))
	ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	ids := checkFenced(t, ms, acctA)
	if want := []uint64{100 << 16, 100<<16 | 1, 101 << 16}; !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	want := []string{"2/1:8", "1/3:8", "2/1:9"}
	if got := rejections(ms); !slices.Equal(got, want) {
		t.Fatalf("rejections %q, want %q (instance/cmdSeq:reason)", got, want)
	}
	if st := c.Stats(); st.RejectedNotActive != 2 || st.RejectedDuplicateID != 1 {
		t.Fatalf("stats: not active %d, duplicate %d", st.RejectedNotActive, st.RejectedDuplicateID)
	}
	// A standby applying the stream holds the same hot-hot table.
	st := stateAt(t, cfg, sink.published, c.State().LastSeq())
	if !bytes.Equal(st.Snapshot(), c.State().Snapshot()) {
		t.Fatal("a State applied from the stream differs from the core's")
	}
	if id, hot := st.HotHot(acctA, 2); id != 101<<16 || !hot {
		t.Fatalf("HotHot: last id %d hot %v", id, hot)
	}
	var restored State
	if err := restored.Restore(st.Snapshot()); err != nil || !bytes.Equal(restored.Snapshot(), st.Snapshot()) {
		t.Fatalf("snapshot round trip: %v", err)
	}
}

// TestCore_HotHotTimeoutAcrossFailover: the silent active is replaced
// after ActiveTimeout on the monotonic clock (not before), a new primary
// built from the stream holds the activation table and restarts the
// timeout (no switch right after the takeover, however far its clock is
// from the old one's), and then switches when the active stays silent.
func TestCore_HotHotTimeoutAcrossFailover(t *testing.T) {
	const ms = int64(time.Millisecond)
	cfg := testConfig()
	cfg.ActiveTimeout = 20 * time.Millisecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 0, hotFrame(t, acctA, 2, 20))
	for now := int64(0); now <= 19*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 2, 20)) // only the passive heartbeats
		c.Tick(at(now))
	}
	if inst, _ := c.State().Active(acctA); inst != 1 {
		t.Fatalf("switched before ActiveTimeout: active %d", inst)
	}
	mustStep(t, c, 21*ms, hotFrame(t, acctA, 2, 20))
	c.Tick(at(21 * ms))
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d after ActiveTimeout of silence, want 2", inst)
	}
	// A failover: the new primary's clock reads something else entirely.
	cut := c.State().LastSeq()
	st := stateAt(t, cfg, sink.published, cut)
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq, ncfg.StartTime = 2, cut+1, c.LastTime()
	n, nsink := newCoreWith(t, ncfg, Takeover{State: st})
	base := int64(5000) * ms
	if inst, ok := n.State().Active(acctA); !ok || inst != 2 {
		t.Fatalf("new primary: active %d %v, want 2", inst, ok)
	}
	// Instance 1 came back and heartbeats; instance 2 (active) is silent
	// but the new primary heard from nobody yet: no switch before its own
	// ActiveTimeout has run.
	for now := base; now < base+19*ms; now += ms {
		mustStep(t, n, now, hotFrame(t, acctA, 1, 10))
		n.Tick(at(now))
	}
	if inst, _ := n.State().Active(acctA); inst != 2 {
		t.Fatalf("spurious switch after the failover: active %d", inst)
	}
	for now := base + 19*ms; now <= base+25*ms; now += ms {
		mustStep(t, n, now, hotFrame(t, acctA, 1, 10))
		n.Tick(at(now))
	}
	if inst, _ := n.State().Active(acctA); inst != 1 {
		t.Fatalf("active %d after the new primary's ActiveTimeout, want 1", inst)
	}
	checkFenced(t, decodeStream(t, nsink.published, cfg.MaxPacketBytes), acctA)
}

// TestCore_HotHotNoSwitchAfterCoreStall: the core itself did not run
// for longer than ActiveTimeout (the process stopped, the host
// suspended); the first frame read after that is the passive's
// heartbeat. Both instances were silent only to a core that was not
// listening: no switch, the timeout restarts, and a switch comes only
// when the active stays silent for ActiveTimeout of the core's running
// time. (Before the fix the passive took over at once: "switched after
// the core's own stall: active 2"; the simulator's idle hours, ticking
// once a second, switched the pair thousands of times a run.)
func TestCore_HotHotNoSwitchAfterCoreStall(t *testing.T) {
	const ms = int64(time.Millisecond)
	cfg := testConfig()
	cfg.ActiveTimeout = 20 * time.Millisecond
	c, sink := newCore(t, cfg)
	for now := int64(0); now <= 10*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 1, 10))
		mustStep(t, c, now, hotFrame(t, acctA, 2, 20))
		c.Tick(at(now))
	}
	stall := 10*ms + int64(time.Second)
	mustStep(t, c, stall, hotFrame(t, acctA, 2, 20)) // the passive's frame is read first
	c.Tick(at(stall))
	if inst, _ := c.State().Active(acctA); inst != 1 {
		t.Fatalf("switched after the core's own stall: active %d", inst)
	}
	mustStep(t, c, stall, hotFrame(t, acctA, 1, 10))
	if got := c.Stats().ActivityRestarts; got != 1 {
		t.Fatalf("ActivityRestarts %d, want 1", got)
	}
	// Now instance 1 is really gone: only the passive heartbeats.
	for now := stall + ms; now < stall+20*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 2, 20))
		c.Tick(at(now))
	}
	if inst, _ := c.State().Active(acctA); inst != 1 {
		t.Fatalf("switched before ActiveTimeout of running time: active %d", inst)
	}
	for now := stall + 20*ms; now <= stall+22*ms; now += ms {
		mustStep(t, c, now, hotFrame(t, acctA, 2, 20))
		c.Tick(at(now))
	}
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d after ActiveTimeout of silence while running, want 2", inst)
	}
	if st := c.Stats(); st.ActivationSwitch != 1 || st.ActivityRestarts != 1 {
		t.Fatalf("switches %d restarts %d, want 1 and 1", st.ActivationSwitch, st.ActivityRestarts)
	}
	c.Flush(at(stall + 23*ms))
	checkFenced(t, decodeStream(t, sink.published, cfg.MaxPacketBytes), acctA)
}

// TestCore_HotHotRestartOfActive: a new incarnation of the active
// instance (the process restarted, losing what it had in flight) hands
// activation to its live partner at once; a restart with no live partner
// announces the activation again, for the new process to hear.
func TestCore_HotHotRestartOfActive(t *testing.T) {
	cfg := testConfig()
	cfg.ActiveTimeout = 50 * time.Millisecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 1, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 2, hotFrame(t, acctA, 1, 11)) // restart, no partner
	if inst, _ := c.State().Active(acctA); inst != 1 {
		t.Fatalf("active %d", inst)
	}
	mustStep(t, c, 3, hotFrame(t, acctA, 2, 20))
	mustStep(t, c, 4, hotFrame(t, acctA, 1, 12)) // restart, partner live
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d after a restart of the active with a live partner, want 2", inst)
	}
	c.Flush(at(5))
	var got []string
	for _, m := range decodeStream(t, sink.published, cfg.MaxPacketBytes) {
		if m.Internal != nil && (m.Internal.Type == wire.InternalNodeActivated || m.Internal.Type == wire.InternalNodeDeactivated) {
			got = append(got, fmt.Sprintf("%v %d", m.Internal.Type, m.Internal.Instance))
		}
	}
	want := []string{"node-activated 1", "node-activated 1", "node-deactivated 1", "node-activated 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("activation records %q, want %q", got, want)
	}
}

// TestCore_ControlCommand: a node asks, by a control command, for an
// instance's activation; the request record names it and uses its
// command seq up, and a request that cannot be carried out is rejected.
func TestCore_ControlCommand(t *testing.T) {
	cfg := testConfig()
	c, sink := newCore(t, cfg)
	mustStep(t, c, 1, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 2, hotFrame(t, acctA, 2, 20))
	ctl := func(seq uint64, op uint8, inst uint8) wire.Command {
		p, err := wire.AppendControl(make([]byte, wire.ControlBytes), &wire.ControlRequest{Op: op, Instance: inst, Account: acctA})
		if err != nil {
			t.Fatal(err)
		}
		return wire.Command{CmdSeq: seq, Flags: wire.CmdControl, Payload: p}
	}
	mustStep(t, c, 3, frame(t, acctB, 1, 5, ctl(1, wire.ControlActivate, 2), ctl(2, wire.ControlActivate, 9), cmd(3, "after")))
	c.Flush(at(4))
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d, want 2", inst)
	}
	if _, last, _ := c.State().Sender(acctB, 1); last != 3 {
		t.Fatalf("requester's last cmdSeq %d, want 3", last)
	}
	ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	if got := rejections(ms); !slices.Equal(got, []string{"1/2:10"}) {
		t.Fatalf("rejections %q", got)
	}
	st := stateAt(t, cfg, sink.published, c.State().LastSeq())
	if !bytes.Equal(st.Snapshot(), c.State().Snapshot()) {
		t.Fatal("a State applied from the stream differs from the core's")
	}
}

// Controls hands an operator's request from another goroutine to the
// core's and its outcome back.
func TestControls_DoApply(t *testing.T) {
	cfg := testConfig()
	c, _ := newCore(t, cfg)
	mustStep(t, c, 1, hotFrame(t, acctA, 1, 10))
	mustStep(t, c, 2, hotFrame(t, acctA, 2, 20))
	var m Controls
	type result struct {
		seq uint64
		err error
	}
	res := make(chan result, 2)
	go func() {
		seq, err := m.Do(t.Context(), wire.ControlActivate, acctA, 2, nil)
		res <- result{seq, err}
		seq, err = m.Do(t.Context(), wire.ControlForcePassive, acctB, 1, nil)
		res <- result{seq, err}
	}()
	for got := 0; got < 2; {
		m.Apply(c.Core, at(3))
		c.Drain()
		select {
		case r := <-res:
			got++
			if got == 1 && (r.err != nil || r.seq == 0) {
				t.Fatalf("activate: %d %v", r.seq, r.err)
			}
			if got == 2 && !errors.Is(r.err, ErrUnknownInstance) {
				t.Fatalf("force-passive of an unknown instance: %v", r.err)
			}
		case <-time.After(time.Millisecond):
		}
	}
	if inst, _ := c.State().Active(acctA); inst != 2 {
		t.Fatalf("active %d, want 2", inst)
	}
}

// An out-of-band command is numbered and deduped as any other; its
// record carries FlagOOB.
func TestCore_OOBCommandFlagged(t *testing.T) {
	cfg := testConfig()
	c, sink := newCore(t, cfg)
	oob := wire.Command{CmdSeq: 1, Flags: wire.CmdOOB, Payload: []byte("now")}
	mustStep(t, c, 1, frame(t, acctA, 1, 5, oob, cmd(2, "later")))
	mustStep(t, c, 2, frame(t, acctA, 1, 5, oob)) // a resend
	c.Flush(at(3))
	var flags []uint8
	for _, m := range decodeStream(t, sink.published, cfg.MaxPacketBytes) {
		if m.Internal == nil {
			flags = append(flags, m.Flags)
		}
	}
	if !slices.Equal(flags, []uint8{wire.FlagOOB, 0}) {
		t.Fatalf("command record flags %v, want [FlagOOB 0]", flags)
	}
}

// Sequencing the active hot-hot instance's commands (fenced by
// activation, deduped by id) allocates nothing per frame.
func TestCore_HotHotStepAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	c, _ := NewSinkShell(cfg, &countingSink{})
	mustStep(t, c, 0, hotFrame(t, acctA, 1, 10)) // the instance on record, active
	mustStep(t, c, 0, hotFrame(t, acctA, 2, 20)) // its partner
	f := hotFrame(t, acctA, 1, 10, hotCmd(1, 1<<16, "0123456789abcdef"))
	// The record's cmdSeq and id, re-stamped in place for each frame.
	seqAt, idAt := wire.CommandHeaderBytes, wire.CommandHeaderBytes+wire.CommandRecordBytes
	next := uint64(0)
	step := func() {
		next++
		binary.LittleEndian.PutUint64(f[seqAt:], next)
		binary.LittleEndian.PutUint64(f[idAt:], (next+1)<<16)
		if err := c.Step(at(int64(next)), f, 1); err != nil {
			t.Fatal(err)
		}
		if next%16 == 0 {
			c.Flush(at(int64(next)))
		}
	}
	step()
	if a := testing.AllocsPerRun(2000, step); a != 0 {
		t.Fatalf("%.1f allocations per hot-hot frame", a)
	}
	if st := c.Stats(); st.Commands != next || st.RejectedNotActive+st.RejectedDuplicateID != 0 {
		t.Fatalf("sequenced %d of %d, rejected %d/%d", st.Commands, next, st.RejectedNotActive, st.RejectedDuplicateID)
	}
}
