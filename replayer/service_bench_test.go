package replayer

import (
	"testing"
	"time"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// BenchmarkReplayerWritePath is a replayer's write rate with the fsync
// interval policy run by the shell (1 ms, on a goroutine of its own, as
// `seqd replayer` runs it): 256-byte messages, five to a packet as the
// sequencer batches them, each packet stable as it arrives (a standalone
// sequencer). path=store is Store.Append alone; path=service adds what
// the Service does per packet (the receiver's Step and Advance, the
// persister), the rate a replayer follows the stream at, to compare with
// the sequencer's batched rate (`seqd bench --transport udp --batch`).
func BenchmarkReplayerWritePath(b *testing.B) {
	dirs := benchDirs(b)
	for _, fs := range []string{"disk", "tmpfs"} {
		for _, path := range []string{"store", "service"} {
			dir, ok := dirs[fs]
			if !ok {
				continue
			}
			b.Run("fs="+fs+"/path="+path+"/size=256", func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.SyncInShell = true
				s := openBenchStore(b, dir, cfg)
				y := newShellSyncer()
				var r *receiver.Receiver
				var p Persister
				if path == "service" {
					rc := receiver.DefaultConfig()
					rc.Persist, rc.Replayer, rc.Rewind, rc.RewindFrom = true, true, true, 1
					var err error
					if r, err = receiver.New(rc); err != nil {
						b.Fatal(err)
					}
					p.Init(PersistConfig{MaxHeldBytes: 64 << 20, MaxPacketBytes: DefaultConfig().MaxPacketBytes})
				}
				pk := newBatchPacket(b, 5, 256)
				b.ReportAllocs()
				b.SetBytes(int64(len(pk.buf)))
				start := time.Now()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pkt := pk.nextPacket()
					wire.SetStable(pkt, pk.next-1)
					if r == nil {
						if err := s.Append(pkt); err != nil {
							b.Fatal(err)
						}
					} else {
						_ = r.Step(int64(i), pkt, receiver.Sequencer)
						rd := r.Ready()
						delivered := r.Next() - 1
						for _, f := range rd.Persist {
							if err := p.Offer(s, f, delivered); err != nil {
								b.Fatal(err)
							}
						}
						if err := p.Drain(s, delivered); err != nil {
							b.Fatal(err)
						}
						r.Advance()
					}
					if i%64 == 0 {
						shellTurn(b, s, y, start, true)
					}
				}
				el := endBenchStore(b, s, y, start)
				if s.Contiguous() != pk.next-1 {
					b.Fatalf("stored up to %d of %d", s.Contiguous(), pk.next-1)
				}
				b.ReportMetric(float64(b.N)*5/el, "msgs/s")
				b.ReportMetric(float64(s.Stats().Fsyncs)/el, "fsyncs/s")
			})
		}
	}
}
