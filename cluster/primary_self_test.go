package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// TestPrimarySelf_CountsWhatItWroteAndServesIt: a new primary's own copy
// is the store it took over; it counts toward stable what that store
// wrote, answers a seal with it and counts no more afterwards, and serves
// its own epoch to a member catching up (a deposed primary still running
// holds the highest answer: were its epoch not served, every catch-up
// would end below the cut until it stopped). On 9764a82 the taken-over
// store served nothing above the takeover's cut ("served up to 10, want
// 11": the election gap of issue 14 seen in the simulator).
func TestPrimarySelf_CountsWhatItWroteAndServesIt(t *testing.T) {
	src := standbytest.NewStream(t)
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range src.Commands(t, 10) {
		s.Step(p, 0)
	}
	const cut = 10
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	core, err := sequencer.NewPrimary(standbytest.SeqConfig(2, cut+1), tk)
	if err != nil {
		t.Fatal(err)
	}
	out := newTeeSink(core, &retainServer{}, tk.History)
	core.Flush(sequencer.Time{Mono: int64(time.Second), Wall: src.Now + 1})
	out.send(core)
	pub := core.Published()
	if pub <= cut {
		t.Fatalf("published %d, want the epoch start above %d", pub, cut)
	}
	_, _, _, held, err := s.FetchRange(nil, cut+1, pub, 1<<20)
	if err != nil || held < pub {
		t.Fatalf("served up to %d (%v), want %d: the primary's own epoch", held, err, pub)
	}
	self := newPrimarySelf(2, tk.History)
	if got := self.position(pub); got != pub {
		t.Fatalf("position %d, want %d written", got, pub)
	}
	got, err := self.seal(2, pub)
	if err != nil || got != pub {
		t.Fatalf("seal: %d, %v; want %d", got, err, pub)
	}
	if _, err := self.seal(1, pub); err == nil {
		t.Fatal("a seal of an earlier epoch was answered")
	}
	if got := self.position(pub + 5); got != pub {
		t.Fatalf("after the seal it counts %d, want no more than it answered (%d)", got, pub)
	}
}

// TestPrimaryShell_TurnWithAStoreAllocatesNothing: a turn of the primary's
// loop over a taken-over standby store, which it writes what it publishes
// to and counts toward stable what that store wrote (primarySelf),
// allocates nothing.
func TestPrimaryShell_TurnWithAStoreAllocatesNothing(t *testing.T) {
	src := standbytest.NewStream(t)
	sc := standbyConfig(t, 1)
	sc.AckWritten = true // the default: it counts what it wrote (durable acks count what it fsynced)
	s := newStandby(t, sc, &standbytest.Client{})
	pkts := src.Commands(t, 10)
	for _, p := range pkts {
		s.Step(p, 0)
	}
	const cut = 10
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl, srv := net.Client(), net.Server()
	cfg := standbytest.SeqConfig(2, cut+1)
	cfg.RingBytes = 1 << 20
	core, err := sequencer.NewPrimary(cfg, tk)
	if err != nil {
		t.Fatal(err)
	}
	mono := int64(time.Second)
	n := &Member{deps: Deps{Clock: func() sequencer.Time {
		mono += 1000
		return sequencer.Time{Mono: mono, Wall: src.Now + mono}
	}}}
	acks := NewQuorumAcks(Epoch{Session: standbytest.Session, Epoch: 2, FirstSeq: cut + 1, Self: 1, Members: []fsm.Member{{ID: 1}, {ID: 2}, {ID: 3}}})
	sh := newPrimaryShell(n, core, srv, acks)
	sh.out = newTeeSink(core, srv, tk.History)
	sh.self = newPrimarySelf(2, tk.History)
	var w wire.CommandWriter
	buf := make([]byte, 2048)
	payload := make([]byte, 64)
	drain := func([]byte, transport.Peer) {}
	seq := standbytest.LastCmdOf(t, pkts, standbytest.Alice, cut)
	turn := func() {
		seq++
		if err := w.Reset(buf, standbytest.Alice, 1, 0, standbytest.Session); err != nil {
			t.Fatal(err)
		}
		c := wire.Command{CmdSeq: seq, Payload: payload}
		if err := w.Append(&c); err != nil {
			t.Fatal(err)
		}
		if err := cl.Send(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := cl.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.turn(); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Poll(drain, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		turn()
	}
	if allocs := testing.AllocsPerRun(1000, turn); allocs != 0 {
		t.Fatalf("%.2f allocations per turn", allocs)
	}
	if got, pub := sh.self.position(core.Published()), core.Published(); got != pub || pub <= cut+200 {
		t.Fatalf("the store wrote %d, published %d", got, pub)
	}
}
