package replayer

import (
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// storeSink is a sequencer.Sink that appends the Core's data packets to a
// Store (nil: drops them), as a standby or an in-process replayer would.
type storeSink struct {
	s      *Store
	err    error
	pkts   uint64
	syncer *shellSyncer
	start  time.Time
}

func (k *storeSink) Publish(pkt []byte) {
	if kind, _ := wire.PeekKind(pkt); kind != wire.KindData {
		return
	}
	k.pkts++
	if k.s == nil || k.err != nil {
		return
	}
	if err := k.s.Append(pkt); err != nil {
		k.err = err
	}
	if k.pkts%64 == 0 {
		if err := k.s.Tick(int64(time.Since(k.start))); err != nil {
			k.err = err
		}
		if k.syncer != nil {
			if err := k.syncer.poll(k.s); err != nil {
				k.err = err
			}
		}
	}
}

func (k *storeSink) SendTo(transport.Peer, []byte) {}

// BenchmarkCoreToStore is the sequencer's full batched rate (commands of
// 8 x 256 bytes, as BenchmarkCoreStep/size=256/batch=8) with every
// published packet appended to a Store in the same goroutine, against the
// Core alone (store=off) in the same run: the ratio of cmds/s says how
// far the store keeps up on this machine.
func BenchmarkCoreToStore(b *testing.B) {
	for _, pol := range []string{"off", "none", "interval-shell", "interval"} {
		b.Run("store="+pol, func(b *testing.B) {
			k := &storeSink{start: time.Now()}
			if pol != "off" {
				cfg := DefaultConfig()
				cfg.Sync, _ = ParseSyncPolicy(strings.TrimSuffix(pol, "-shell"))
				cfg.SyncInShell = pol == "interval-shell"
				cfg.Session = testSession
				s, _, err := Open(b.TempDir(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				k.s = s
				if cfg.SyncInShell {
					k.syncer = newShellSyncer()
					defer k.syncer.close(s)
				}
			}
			ccfg := sequencer.DefaultConfig()
			ccfg.Session = testSession
			ccfg.RingBytes = 32768 * ccfg.MaxPacketBytes
			c, err := sequencer.NewSinkShell(ccfg, k)
			if err != nil {
				b.Fatal(err)
			}
			const batch, size = 8, 256
			frame := make([]byte, wire.CommandHeaderBytes+batch*(wire.CommandRecordBytes+size))
			var w wire.CommandWriter
			if err := w.Reset(frame, 7, 1, 1, testSession); err != nil {
				b.Fatal(err)
			}
			offs := make([]int, batch)
			for i := range offs {
				offs[i] = w.Len()
				if err := w.Append(&wire.Command{CmdSeq: uint64(i + 1), Payload: make([]byte, size)}); err != nil {
					b.Fatal(err)
				}
			}
			cmdSeq := uint64(0)
			b.ReportAllocs()
			b.SetBytes(batch * size)
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, o := range offs {
					cmdSeq++
					le.PutUint64(frame[o:], cmdSeq)
				}
				now := sequencer.Time{Mono: int64(i), Wall: int64(i)}
				if err := c.Step(now, frame, 1); err != nil {
					b.Fatal(err)
				}
			}
			c.Flush(sequencer.Time{Mono: int64(b.N), Wall: int64(b.N)})
			if k.s != nil {
				if err := k.s.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start).Seconds()
			if k.err != nil {
				b.Fatal(k.err)
			}
			if got := c.Stats().Commands; got != uint64(b.N*batch) {
				b.Fatalf("sequenced %d of %d", got, b.N*batch)
			}
			b.ReportMetric(float64(b.N*batch)/el, "cmds/s")
		})
	}
}
