package inventory

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/examples/inventory/internal/pgtest"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// discardStore is a Store that keeps nothing: the benchmark measures
// the handler, not the database (Arcturus's figure is "without I/O").
type discardStore struct{}

func (discardStore) Load(context.Context) (*Snapshot, error) { return &Snapshot{}, nil }
func (discardStore) Write(context.Context, *Batch) error     { return nil }
func (discardStore) Orders(context.Context) ([]Order, error) { return nil, nil }
func (discardStore) Close() error                            { return nil }

type storeSink struct {
	t testing.TB
	s *replayer.Store
}

func (k storeSink) Publish(pkt []byte) {
	if kind, _ := wire.PeekKind(pkt); kind == wire.KindData {
		if err := k.s.Append(pkt); err != nil {
			k.t.Fatal(err)
		}
	}
}
func (storeSink) SendTo(transport.Peer, []byte) {}

// writeArchive runs a real sequencer Core over n single-update
// transactions on keys keys (a restock of each first, then reservations
// of 1), sent by one node in full command frames, into a real replayer
// Store: the session archive a replay reads.
func writeArchive(t testing.TB, n, keys int) string {
	t.Helper()
	dir := t.TempDir()
	scfg := replayer.DefaultConfig()
	scfg.Sync = replayer.SyncNone
	st, _, err := replayer.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.DefaultConfig()
	cfg.Session = 0x17
	cfg.RingBytes = 1 << 20
	c, err := sequencer.NewSinkShell(cfg, storeSink{t, st})
	if err != nil {
		t.Fatal(err)
	}
	acct := wire.MustAccount("FRONT")
	var w wire.CommandWriter
	buf := make([]byte, wire.DefaultMaxPacketBytes)
	clock := int64(1_700_000_000_000_000_000)
	var cmd uint64
	flush := func() {
		if w.Count() == 0 {
			return
		}
		clock += 1000
		now := sequencer.Time{Mono: clock, Wall: clock}
		if err := c.Step(now, w.Bytes(), 1); err != nil {
			t.Fatal(err)
		}
		c.Flush(now)
		if err := w.Reset(buf, acct, 0, 1, cfg.Session); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Reset(buf, acct, 0, 1, cfg.Session); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 0, 64)
	for i := range n {
		delta := int64(-1)
		if i < keys {
			delta = int64(n)
		}
		p, _ = AppendTxn(p[:0], 0, uint64(i), Update{Key: fmt.Sprintf("sku-%06d", i%keys), Delta: delta})
		cmd++
		if w.Room() < len(p) {
			flush()
		}
		if err := w.Append(&wire.Command{CmdSeq: cmd, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newBenchService(t testing.TB) *Service {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Replies = false // no node to send them: the handler's own cost
	s, err := NewService(context.Background(), cfg, discardStore{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkReplayArchive is the service's handler applying single-update
// transactions replayed from a session archive (a real Store's files,
// read by node.Archive through a read-only node Core) on one goroutine,
// batches handed to a Flusher whose store discards them: the seed's
// "single ops, without I/O" figure (Arcturus: ~0.95M/s).
func BenchmarkReplayArchive(b *testing.B) {
	const n = 1_000_000
	dir := writeArchive(b, n, 10_000)
	ar, err := node.OpenArchive(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ar.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var txns uint64
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		s := newBenchService(b)
		runtime.GC()
		c0 := cpuTime()
		b.StartTimer()
		if _, err := ar.Replay(1, 0, s); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		txns += s.State().Txns()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(txns)/b.Elapsed().Seconds(), "tx/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(txns), "ns/tx")
	// CPU time (rusage, user+system, every thread of the process): on a
	// loaded machine less noisy than the wall-clock rate.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(txns), "cpu-ns/tx")
	b.ReportMetric(float64(txns)/cpu.Seconds(), "tx/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApply is State.Apply alone on a known key (no stream).
func BenchmarkApply(b *testing.B) {
	s := NewState(16)
	var r Reply
	s.Apply(1, 1, txnBytes(b, Update{"sku-000001", 1 << 60}), &r)
	p := txnBytes(b, Update{"sku-000001", -1})
	var bt Batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Apply(uint64(i+2), 1, p, &r)
		if i%4096 == 0 {
			s.TakeBatch(&bt)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

func txnBytes(t testing.TB, ups ...Update) []byte {
	p, err := AppendTxn(nil, 0, 1, ups...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestService_ReplayAllocatesNothingPerTxn: replaying ten times as many
// transactions through the Service allocates no more (keys are known
// after the first tenth: a new key costs its string once).
func TestService_ReplayAllocatesNothingPerTxn(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	dir := writeArchive(t, 60_000, 100)
	ar, err := node.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	first, last := ar.Seqs()
	s := newBenchService(t)
	defer s.Close()
	if _, err := ar.Replay(1, first+100, s); err != nil { // every key seen
		t.Fatal(err)
	}
	run := func(to uint64) float64 {
		return testing.AllocsPerRun(3, func() {
			// Again over the same seqs: the Service skips what it applied,
			// so replay a fresh range each time by rewinding the state.
			s.state.seq, s.state.taken = first+100, first+100
			if _, err := ar.Replay(first+101, to, s); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := run(first+100+(last-first-100)/10), run(last)
	t.Logf("allocations per replay: %v (a tenth), %v (all %d seqs)", small, large, last)
	if large > small+1 {
		t.Fatalf("replaying ten times the transactions allocates %v, a tenth %v: allocation per transaction", large, small)
	}
	if s.State().Txns() < 50_000 {
		t.Fatalf("applied %d transactions", s.State().Txns())
	}
}

// TestService_OnMessageAllocatesNothing: the handler on one message, a
// transaction on a known key, allocates nothing (hand-offs included).
func TestService_OnMessageAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	s := newBenchService(t)
	defer s.Close()
	m := &node.Message{Seq: 1, Account: wire.MustAccount("FRONT"), Payload: txnBytes(t, Update{"sku", 1 << 60})}
	s.OnMessage(m)
	m.Payload = txnBytes(t, Update{"sku", -1})
	for range 10_000 { // warm the batches' slices
		m.Seq++
		s.OnMessage(m)
	}
	if a := testing.AllocsPerRun(10_000, func() { m.Seq++; s.OnMessage(m) }); a != 0 {
		t.Fatalf("OnMessage allocates %v per transaction, want 0", a)
	}
}

// BenchmarkFlush is one flush of 1000 changed keys and 100 orders (one
// database transaction) on SQLite (WAL, synchronous=NORMAL) and on
// PostgreSQL (started by the test; fsync off).
func BenchmarkFlush(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run("db="+db, func(b *testing.B) {
			url := "sqlite:" + filepath.Join(b.TempDir(), "inv.db")
			if db == "postgres" {
				url = pgtest.Start(b)
			}
			st, err := OpenStore(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			bt := &Batch{}
			for k := range 1000 {
				bt.Keys = append(bt.Keys, fmt.Sprintf("sku-%06d", k))
				bt.Stock = append(bt.Stock, int64(k))
			}
			b.ResetTimer()
			for i := range b.N {
				bt.Seq = uint64(i+1) * 1000
				bt.Orders = bt.Orders[:0]
				for k := range 100 {
					bt.Orders = append(bt.Orders, Order{Seq: bt.Seq - uint64(k), Account: 1, Ref: uint64(k), Key: bt.Keys[k], Delta: -1})
				}
				if err := st.Write(context.Background(), bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*1100)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
