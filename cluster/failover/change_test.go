package failover

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/seqd/seqd/fsm"
)

// TestChange_Scenarios runs the protocol scenarios of testdata/: each
// command steps the core (or builds the failover state it reads) and
// prints what the core asks for next. Rewrite with -rewrite and review
// every change.
func TestChange_Scenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := h.run(t, d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

// harness is one scenario: the failover state (its own Raft log, applied
// in order), the core, and the proposal waiting for "commit".
type harness struct {
	st      *fsm.State
	index   uint64
	c       *Change
	now     int64
	pending fsm.Command
	barrier bool
}

func (h *harness) apply(cmd fsm.Command) error {
	h.index++
	st, err := h.st.Apply(h.index, cmd)
	h.st = st
	return err
}

func member(id uint64, role fsm.Role) fsm.Member {
	return fsm.Member{ID: id, Role: role, RaftAddr: fmt.Sprintf("m%d:raft", id), StreamAddr: fmt.Sprintf("m%d:stream", id)}
}

func ids(s string) []uint64 {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				panic(err)
			}
			out = append(out, v)
		}
	}
	return out
}

func u64(d *datadriven.TestData, key string, def uint64) uint64 {
	if !d.HasArg(key) {
		return def
	}
	s := str(d, key)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%s: %v", key, s, err))
	}
	return v
}

func str(d *datadriven.TestData, key string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			return strings.Join(a.Vals, ",")
		}
	}
	return ""
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) (string, error) {
	if d.HasArg("now") {
		h.now = int64(u64(d, "now", 0))
	}
	switch d.Cmd {
	case "state":
		// state voters=1,2,3 [nonvoters=4] [epochs=1@0,3@13] [checkpoint=SEQ@NS]
		// epochs: primary@cut-of-the-epoch-before, from epoch 1 on.
		h.st, h.index = fsm.Initial(), 0
		if err := h.apply(fsm.NewSession{}); err != nil {
			return "", err
		}
		for _, id := range ids(str(d, "voters")) {
			if err := h.apply(fsm.AddMember{Member: member(id, fsm.Voter)}); err != nil {
				return "", err
			}
		}
		for _, id := range ids(str(d, "nonvoters")) {
			if err := h.apply(fsm.AddMember{Member: member(id, fsm.Nonvoter)}); err != nil {
				return "", err
			}
		}
		if e := str(d, "epochs"); e != "" {
			for _, f := range strings.Split(e, ",") {
				p, c, _ := strings.Cut(f, "@")
				pv, _ := strconv.ParseUint(p, 10, 64)
				cv, _ := strconv.ParseUint(c, 10, 64)
				if err := h.apply(fsm.BeginEpoch{Epoch: h.st.Epoch() + 1, Primary: pv, PrevCut: cv}); err != nil {
					return "", err
				}
			}
		}
		if cp := str(d, "checkpoint"); cp != "" {
			s, ns, _ := strings.Cut(cp, "@")
			sv, _ := strconv.ParseUint(s, 10, 64)
			nv, _ := strconv.ParseInt(ns, 10, 64)
			if err := h.apply(fsm.AddCheckpoint{Epoch: h.st.Epoch(), Seq: sv, UnixNano: nv}); err != nil {
				return "", err
			}
		}
		return h.st.String() + "\n", nil
	case "empty":
		h.st, h.index = fsm.Initial(), 0
		return h.st.String() + "\n", nil
	case "new":
		// new self=ID [bootstrap=IDS] [grace=NS] [timeout=NS] [retry=NS] [failures=N]
		cfg := DefaultConfig()
		cfg.Self = u64(d, "self", 0)
		cfg.GraceNS = int64(u64(d, "grace", 5))
		cfg.SealTimeoutNS = int64(u64(d, "timeout", 500))
		cfg.RetryNS = int64(u64(d, "retry", 300))
		cfg.MaxFailures = int(u64(d, "failures", 3))
		for _, id := range ids(str(d, "bootstrap")) {
			cfg.Bootstrap = append(cfg.Bootstrap, member(id, 0))
		}
		c, err := New(cfg, h.st, h.now)
		if err != nil {
			return "", err
		}
		h.c = c
	case "recorded":
		// The shells record the seal in Raft (fsm.SealEpoch).
		e := u64(d, "epoch", 0)
		if err := h.apply(fsm.SealEpoch{Epoch: e}); err != nil {
			return "", err
		}
		h.c.Step(h.now, SealRecorded{Epoch: e})
	case "reply":
		// reply from=ID epoch=E c=SEQ [held=E] [stamp=NS] [err=TEXT]
		r := SealReply{From: u64(d, "from", 0), Epoch: u64(d, "epoch", 0), Contiguous: u64(d, "c", 0),
			HeldEpoch: u64(d, "held", 0), LastStamp: int64(u64(d, "stamp", 0))}
		if e := str(d, "err"); e != "" {
			r.Err = errors.New(e)
		}
		h.c.Step(h.now, r)
	case "tick":
		h.c.Tick(h.now)
	case "fetched":
		f := Fetched{Held: u64(d, "held", 0)}
		if e := str(d, "err"); e != "" {
			f.Err = errors.New(e)
		}
		h.c.Step(h.now, f)
	case "tookover":
		var m TookOver
		if e := str(d, "err"); e != "" {
			m.Err = errors.New(e)
		}
		h.c.Step(h.now, m)
	case "commit":
		// The pending proposal (or barrier) commits on the state.
		switch {
		case h.pending != nil:
			cmd := h.pending
			h.pending = nil
			if err := h.apply(cmd); err != nil {
				h.c.Step(h.now, Rejected{Err: err, Refused: true})
				break
			}
			h.c.Step(h.now, Committed{State: h.st})
		case h.barrier:
			h.barrier = false
			h.c.Step(h.now, Committed{State: h.st})
		default:
			return "", errors.New("nothing to commit")
		}
	case "lose":
		// The pending proposal's answer is lost (a Raft timeout); with
		// "lose committed" the entry committed all the same.
		if h.pending != nil && d.HasArg("committed") {
			if err := h.apply(h.pending); err != nil {
				return "", err
			}
		}
		h.pending, h.barrier = nil, false
		h.c.Step(h.now, Rejected{Err: errors.New("raft: timed out")})
	case "begin":
		// Another leader's BeginEpoch commits meanwhile.
		// begin primary=ID cut=SEQ
		if err := h.apply(fsm.BeginEpoch{Epoch: h.st.Epoch() + 1, Primary: u64(d, "primary", 0), PrevCut: u64(d, "cut", 0)}); err != nil {
			return "", err
		}
		return h.st.String() + "\n", nil
	case "checkseal":
		if err := CheckSeal(h.st, u64(d, "epoch", 0)); err != nil {
			return "refused: " + err.Error() + "\n", nil
		}
		return "ok\n", nil
	default:
		return "", fmt.Errorf("unknown command %q", d.Cmd)
	}
	return h.ready(), nil
}

// ready prints the core's Ready and phase, and keeps what "commit" needs.
func (h *harness) ready() string {
	var b strings.Builder
	rd := h.c.Ready()
	if rd.Barrier {
		h.barrier = true
		b.WriteString("barrier\n")
	}
	if rd.Propose != nil {
		h.pending = rd.Propose
		switch p := rd.Propose.(type) {
		case fsm.AddMember:
			fmt.Fprintf(&b, "propose add-member id=%d role=%v\n", p.Member.ID, p.Member.Role)
		case fsm.NewSession:
			fmt.Fprintf(&b, "propose new-session prev=%d\n", p.Prev)
		case fsm.BeginEpoch:
			fmt.Fprintf(&b, "propose begin-epoch epoch=%d primary=%d cut=%d\n", p.Epoch, p.Primary, p.PrevCut)
		case fsm.DropCheckpoints:
			fmt.Fprintf(&b, "propose drop-checkpoints epoch=%d above=%d\n", p.Epoch, p.Above)
		default:
			fmt.Fprintf(&b, "propose %v\n", p.Kind())
		}
	}
	if rd.RecordSeal != 0 {
		fmt.Fprintf(&b, "record-seal epoch=%d\n", rd.RecordSeal)
	}
	for _, s := range rd.Seal {
		fmt.Fprintf(&b, "seal to=%d epoch=%d\n", s.To.ID, s.Epoch)
	}
	if f := rd.Fetch; f != nil {
		var p []string
		for _, m := range f.Peers {
			p = append(p, strconv.FormatUint(m.ID, 10))
		}
		fmt.Fprintf(&b, "fetch cut=%d peers=%s\n", f.Cut, strings.Join(p, ","))
	}
	if t := rd.TakeOver; t != nil {
		fmt.Fprintf(&b, "takeover epoch=%d cut=%d\n", t.Epoch, t.Cut)
	}
	if s := rd.Start; s != nil {
		var v []string
		for _, m := range s.Voters {
			v = append(v, strconv.FormatUint(m.ID, 10))
		}
		fmt.Fprintf(&b, "start session=%d epoch=%d first=%d clock=%d voters=%s\n", s.Session, s.Epoch, s.FirstSeq, s.StartTime, strings.Join(v, ","))
	}
	if rd.StepAside {
		b.WriteString("step-aside\n")
	}
	if rd.Failed != nil {
		fmt.Fprintf(&b, "failed: %v\n", strings.ReplaceAll(rd.Failed.Error(), "\n", "; "))
	}
	fmt.Fprintf(&b, "phase=%v", h.c.Phase())
	if h.c.Phase() == PhaseSealing {
		fmt.Fprintf(&b, " need=%d", h.c.Need())
	}
	if st := h.c.Stats(); st.StaleReplies+st.Strangers+st.Capped > 0 {
		fmt.Fprintf(&b, " stale=%d strangers=%d capped=%d", st.StaleReplies, st.Strangers, st.Capped)
	}
	b.WriteString("\n")
	return b.String()
}

// TestSealQuorum: the fewest answers that intersect every majority.
func TestSealQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 4} {
		if got := SealQuorum(n); got != want {
			t.Errorf("SealQuorum(%d) = %d, want %d", n, got, want)
		}
		// Every set of that size meets every majority: |S| + majority > n.
		if SealQuorum(n)+n/2+1 <= n {
			t.Errorf("SealQuorum(%d) misses a majority", n)
		}
		// One fewer does not: n/2 unsealed members would be a majority.
		if SealQuorum(n)-1+n/2+1 > n {
			t.Errorf("SealQuorum(%d) is not the fewest", n)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Self 0: %v", err)
	}
	c.Self = 1
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.GraceNS = c.SealTimeoutNS + 1
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "GraceNS") {
		t.Fatalf("grace past the timeout: %v", err)
	}
}
