package replayer

import (
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestNaks_AnswerBudgetedPerSource: one 48-byte NAK for the whole store
// buys at most the per-source burst (and one packet), NAKs repeated at
// once from the same source get nothing more, and another source has a
// budget of its own. Before, the default service answered a NAK for
// 1..tail with about 1 MiB (21,839x amplification, issue 16).
func TestNaks_AnswerBudgetedPerSource(t *testing.T) {
	st := mixed(8000)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts)
	held := 0
	for _, p := range st.pkts {
		held += len(p)
	}
	last := s.Contiguous()
	rc := DefaultServiceConfig().Repair
	if held < 2*rc.NakAnswerBytes {
		t.Fatalf("store holds %d bytes, want more than 2 x NakAnswerBytes (%d): the test proves nothing", held, rc.NakAnswerBytes)
	}
	sink := &captureSink{}
	var x naks
	x.init(rc, sink)
	nak := nakFrame(t, wire.Nak{Epoch: 1, Session: testSession, FromSeq: 1, ToSeq: last})
	answered := func() int {
		n := 0
		for _, p := range sink.sent {
			n += len(p)
		}
		for _, p := range sink.published { // a second asker gets a multicast answer
			n += len(p)
		}
		sink.sent, sink.published = sink.sent[:0], sink.published[:0]
		return n
	}
	x.step(1, nak, 5, s)
	first := answered()
	limit := rc.SourceBurstBytes + rc.MaxPacketBytes
	t.Logf("one %d-byte NAK answered with %d bytes (%dx)", len(nak), first, first/len(nak))
	if first == 0 || first > limit {
		t.Fatalf("one NAK answered with %d bytes, want 1..%d (SourceBurstBytes + one packet)", first, limit)
	}
	for i := 0; i < 10; i++ {
		x.step(1, nak, 5, s)
	}
	if again := answered(); again != 0 || x.Stats().SourceThrottled == 0 {
		t.Fatalf("10 more NAKs at once from the same source got %d bytes, stats %+v", again, x.Stats())
	}
	x.step(1, nak, 6, s)
	if other := answered(); other == 0 {
		t.Fatal("another source got nothing: the budget is per source")
	}
}
