package standby

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/sequencer"
)

// BenchmarkStandby_Batch is the standby's in-order path as `seqd bench
// --sequencers 3` drives it: packets of five 256-byte commands, and per
// poll batch of 16 packets one store flush (Store.Tick) and one ack, as
// Run does. Per packet.
func BenchmarkStandby_Batch(b *testing.B) {
	src := standbytest.NewStream(b)
	payload := strings.Repeat("x", 256)
	var pkts [][]byte
	for len(src.Pkts) < 20000 {
		for range 5 {
			src.CmdSeq++
			src.Now += 1000
			if err := src.Core.Step(sequencer.Time{Mono: src.Now, Wall: src.Now}, standbytest.CmdFrame(b, src.CmdSeq, payload), 1); err != nil {
				b.Fatal(err)
			}
		}
		src.Core.Flush(sequencer.Time{Mono: src.Now, Wall: src.Now})
	}
	pkts = src.Pkts
	fresh := func() *Agent {
		cfg := standbyConfig(b, 2)
		cfg.AckWritten = true
		cfg.Store.SegmentBytes = 1 << 30
		return newStandby(b, cfg, &standbytest.Client{})
	}
	s := fresh()
	b.ReportAllocs()
	b.SetBytes(5 * 256)
	i := 0
	for b.Loop() {
		if i == len(pkts) {
			b.StopTimer()
			s.Close()
			s = fresh()
			i = 0
			b.StartTimer()
		}
		s.frame(pkts[i], 0)
		i++
		if i%16 == 0 {
			now := s.clock()
			s.mu.Lock()
			if err := s.core.store.Tick(now); err != nil {
				b.Fatal(err)
			}
			s.ackLocked(now)
			s.mu.Unlock()
		}
	}
	if s.Err() != nil {
		b.Fatal(s.Err())
	}
}
