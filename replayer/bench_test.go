package replayer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
	"golang.org/x/sys/unix"
)

// batchPacket is a reusable stream packet of n records of size bytes, as
// the sequencer batches 256-byte messages into 1472-byte packets; next
// renumbers it to follow the previous one.
type batchPacket struct {
	buf  []byte
	n    uint64
	next uint64
}

func newBatchPacket(tb testing.TB, n, size int) *batchPacket {
	tb.Helper()
	b := &batchPacket{buf: make([]byte, wire.PacketHeaderBytes+n*(wire.RecordHeaderBytes+size)), n: uint64(n), next: 1}
	var w wire.PacketWriter
	if err := w.Reset(b.buf, wire.KindData, 1, testSession, 1, 0, 1); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := w.Append(&wire.Record{Payload: payload(uint64(i), size), Account: 7, CmdSeq: uint64(i + 1)}); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func (b *batchPacket) nextPacket() []byte {
	le.PutUint64(b.buf[24:], b.next)
	b.next += b.n
	return b.buf
}

func TestStore_AppendAllocatesNothing(t *testing.T) {
	for _, pol := range []string{"none", "interval", "interval-shell", "always"} {
		t.Run(pol, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Sync, _ = ParseSyncPolicy(strings.TrimSuffix(pol, "-shell"))
			cfg.SyncInShell = strings.HasSuffix(pol, "-shell")
			cfg.SyncBytes = 64 << 10
			cfg.MaxPacketBytes = 1472
			cfg.WriteBufferBytes = 16 << 10 // flushes happen within the run
			s, _ := mustOpen(t, t.TempDir(), cfg)
			defer s.Close()
			b := newBatchPacket(t, 5, 256)
			if err := s.Append(b.nextPacket()); err != nil { // the first segment
				t.Fatal(err)
			}
			now := int64(0)
			runs := 3000
			if pol == "always" {
				runs = 200 // an fsync each
			}
			allocs := testing.AllocsPerRun(runs, func() {
				now += int64(100 * time.Microsecond)
				if err := s.Append(b.nextPacket()); err != nil {
					t.Fatal(err)
				}
				if err := s.Tick(now); err != nil {
					t.Fatal(err)
				}
				if s.SyncDue() { // a shell's fsync, here on the same goroutine
					if r, ok := s.StartSync(); ok {
						if err := s.FinishSync(r, r.Run()); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
			if allocs != 0 {
				t.Fatalf("Append+Tick allocates %v per packet", allocs)
			}
			if pol != "none" && s.Stats().Fsyncs == 0 {
				t.Fatal("no fsync during the run")
			}
			var fn sequencer.PacketFunc = func([]byte, sequencer.PacketInfo) bool { return true }
			last := s.Contiguous()
			allocs = testing.AllocsPerRun(1000, func() {
				s.Range(last-200, last-100, fn)
				s.Oldest()
				s.Newest()
				s.EpochOf(last - 5)
			})
			if allocs != 0 {
				t.Fatalf("Range allocates %v", allocs)
			}
		})
	}
}

// benchDirs are the file systems the write benchmarks run on: the disk
// (TMPDIR) and, when there is one, tmpfs (the store's own cost, with no
// disk behind it).
func benchDirs(b *testing.B) map[string]string {
	dirs := map[string]string{"disk": b.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "replayer-bench")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			dirs["tmpfs"] = d
		}
	}
	return dirs
}

// shellSyncer is the fsync goroutine of a shell using SyncInShell: a
// Syncer, as the Service's and the standby's.
type shellSyncer struct{ *Syncer }

// openBenchStore opens a store with cfg in a new directory under dir;
// both go when the benchmark ends.
func openBenchStore(b *testing.B, dir string, cfg Config) *Store {
	b.Helper()
	d, err := os.MkdirTemp(dir, "store")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	s, _, err := Open(d, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// shellTurn is what a replayer's shell does every 64 packets: Tick the
// store and, when the shell runs the fsyncs (Config.SyncInShell), poll
// its syncer.
func shellTurn(b *testing.B, s *Store, y *shellSyncer, start time.Time, inShell bool) {
	if err := s.Tick(int64(time.Since(start))); err != nil {
		b.Fatal(err)
	}
	if inShell {
		if err := y.poll(s); err != nil {
			b.Fatal(err)
		}
	}
}

// endBenchStore stops the syncer and syncs the store; it returns the
// seconds since start.
func endBenchStore(b *testing.B, s *Store, y *shellSyncer, start time.Time) float64 {
	if err := y.close(s); err != nil {
		b.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start).Seconds()
}

func newShellSyncer() *shellSyncer { return &shellSyncer{NewSyncer(nil)} }

// poll finishes a sync that has ended and starts one when due.
func (y *shellSyncer) poll(s *Store) error {
	if req, err, ok := y.Done(); ok {
		if err := s.FinishSync(req, err); err != nil {
			return err
		}
	}
	if !y.Out() && s.SyncDue() {
		if r, ok := s.StartSync(); ok {
			y.Start(r)
		}
	}
	return nil
}

func (y *shellSyncer) close(s *Store) error {
	defer y.Close()
	if req, err, ok := y.Wait(); ok {
		return s.FinishSync(req, err)
	}
	return nil
}

// BenchmarkStoreAppend is the write rate of 256-byte messages, five to a
// 1456-byte packet as the sequencer batches them, under each fsync policy
// (Tick every 64 packets, as a shell would call it); interval-shell runs
// the interval policy's fsyncs on a goroutine of the shell's.
func BenchmarkStoreAppend(b *testing.B) {
	dirs := benchDirs(b)
	for _, fs := range []string{"disk", "tmpfs"} {
		for _, pol := range []string{"none", "interval", "interval-shell", "always"} {
			dir, ok := dirs[fs]
			if !ok || (pol == "always" && fs == "tmpfs") {
				continue
			}
			b.Run("fs="+fs+"/fsync="+pol+"/size=256", func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.Sync, _ = ParseSyncPolicy(strings.TrimSuffix(pol, "-shell"))
				cfg.SyncInShell = strings.HasSuffix(pol, "-shell")
				s := openBenchStore(b, dir, cfg)
				y := newShellSyncer()
				p := newBatchPacket(b, 5, 256)
				b.ReportAllocs()
				b.SetBytes(int64(len(p.buf)))
				start := time.Now()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Append(p.nextPacket()); err != nil {
						b.Fatal(err)
					}
					if i%64 == 0 {
						shellTurn(b, s, y, start, cfg.SyncInShell)
					}
				}
				el := endBenchStore(b, s, y, start)
				b.ReportMetric(float64(b.N)/el, "pkts/s")
				b.ReportMetric(float64(b.N)*5/el, "msgs/s")
				b.ReportMetric(float64(s.Stats().Fsyncs)/el, "fsyncs/s")
			})
		}
	}
}

// BenchmarkStoreRange answers NAKs of 8 packets from a store of 64 MiB.
func BenchmarkStoreRange(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Sync = SyncNone
	s, _, err := Open(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := newBatchPacket(b, 5, 256)
	for i := 0; i < 64<<20/len(p.buf); i++ {
		if err := s.Append(p.nextPacket()); err != nil {
			b.Fatal(err)
		}
	}
	last := s.Contiguous()
	var fn sequencer.PacketFunc = func([]byte, sequencer.PacketInfo) bool { return true }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from := 1 + uint64(i)*7919%(last-40)
		s.Range(from, from+39, fn)
	}
}

// BenchmarkStoreOpen is recovery: Open of a store of the given size,
// checking every frame, with the page cache warm (the store was just
// written) or cold (its pages dropped with posix_fadvise before each Open).
func BenchmarkStoreOpen(b *testing.B) {
	for _, c := range []struct {
		mib  int
		cold bool
	}{{64, false}, {1024, false}, {1024, true}} {
		mib := c.mib
		name := "size=" + strconv.Itoa(mib) + "MiB/cache=warm"
		if c.cold {
			name = "size=" + strconv.Itoa(mib) + "MiB/cache=cold"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			cfg := DefaultConfig()
			cfg.Sync = SyncNone
			s, _, err := Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			p := newBatchPacket(b, 5, 256)
			for i := 0; i < mib<<20/(len(p.buf)+FrameHeaderBytes); i++ {
				if err := s.Append(p.nextPacket()); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
			b.SetBytes(int64(mib) << 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if c.cold {
					b.StopTimer()
					dropCache(b, dir)
					b.StartTimer()
				}
				s, rec, err := Open(dir, cfg)
				if err != nil || rec.Corrupt != nil || len(rec.Cuts) != 0 {
					b.Fatal(err, rec)
				}
				s.Close()
			}
		})
	}
}

// dropCache asks the kernel to drop the (clean) cached pages of the
// store's files.
func dropCache(b *testing.B, dir string) {
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for _, p := range segs {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkStoreAppendBigPackets is Append of the packets a group's
// primary publishes over UDP with GSO (and its standbys store): 220
// records of 256 bytes in one 64 KiB packet, no fsync, on the disk and
// on tmpfs (the store's own CPU without a disk file system's). Per
// packet; cpu-ns/B is the process's user and system CPU per byte.
func BenchmarkStoreAppendBigPackets(b *testing.B) {
	dirs := benchDirs(b)
	for _, fs := range []string{"disk", "tmpfs"} {
		dir, ok := dirs[fs]
		if !ok {
			continue
		}
		b.Run("fs="+fs, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Sync = SyncNone
			s := openBenchStore(b, dir, cfg)
			y := newShellSyncer()
			p := newBatchPacket(b, 220, 256)
			b.ReportAllocs()
			b.SetBytes(int64(len(p.buf)))
			start := time.Now()
			cpu0 := processCPU()
			for b.Loop() {
				if err := s.Append(p.nextPacket()); err != nil {
					b.Fatal(err)
				}
			}
			cpu := processCPU() - cpu0
			endBenchStore(b, s, y, start)
			// The process's CPU (user and system, so the write system
			// calls' page-cache work too) per packet byte appended.
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(len(p.buf)), "cpu-ns/B")
		})
	}
}

// processCPU is the process's user and system CPU so far, in ns.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
