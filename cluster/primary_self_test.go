package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/sequencer"
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
