package replayer

import (
	"errors"
	"github.com/seqd/seqd/internal/vfs"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// checkStore checks everything a reader sees of a store that holds pkts.
func checkStore(t *testing.T, s *Store, st *stream, pkts [][]byte) {
	t.Helper()
	last := lastSeq(pkts)
	got, _ := collect(s, 1, last)
	samePackets(t, "Range(1, last)", got, pkts)
	if c := s.Contiguous(); c != last {
		t.Fatalf("Contiguous = %d, want %d", c, last)
	}
	o, ok := s.Oldest()
	if !ok || o != packetInfo(pkts[0]) {
		t.Fatalf("Oldest = %+v %v, want %+v", o, ok, packetInfo(pkts[0]))
	}
	n, ok := s.Newest()
	if !ok || n != packetInfo(pkts[len(pkts)-1]) {
		t.Fatalf("Newest = %+v %v, want %+v", n, ok, packetInfo(pkts[len(pkts)-1]))
	}
	// Every record's epoch is the one its packet's EpochStart says.
	var p wire.Packet
	var r wire.Record
	var starts []Epoch
	for _, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		if len(starts) == 0 || starts[len(starts)-1].Epoch < p.Epoch {
			starts = append(starts, Epoch{p.Epoch, p.EpochStart})
		}
		for p.Next(&r) {
			want := starts[0].Epoch
			for _, e := range starts {
				if e.Start <= r.Seq {
					want = e.Epoch
				}
			}
			if e, ok := s.EpochOf(r.Seq); !ok || e != want {
				t.Fatalf("EpochOf(%d) = %d %v, want %d", r.Seq, e, ok, want)
			}
		}
	}
	if _, ok := s.EpochOf(last + 1); ok {
		t.Fatalf("EpochOf(%d) past the tail answered", last+1)
	}
	_ = st
}

func TestStore_RoundTripAcrossRollsAndReopen(t *testing.T) {
	onEachFS(t, testStoreRoundTripAcrossRollsAndReopen)
}

func testStoreRoundTripAcrossRollsAndReopen(t *testing.T, cfg Config, dir string) {
	st := mixed(3000)
	s, rec := mustOpen(t, dir, cfg)
	if rec.Segments != 0 || rec.Packets != 0 {
		t.Fatalf("new store: %+v", rec)
	}
	half := len(st.pkts) / 2
	appendAll(t, s, st.pkts[:half])
	checkStore(t, s, st, st.pkts[:half])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, rec = mustOpen(t, dir, cfg)
	if len(rec.Cuts) != 0 || rec.Corrupt != nil || rec.Packets != uint64(half) {
		t.Fatalf("reopen: %+v", rec)
	}
	checkStore(t, s, st, st.pkts[:half])
	appendAll(t, s, st.pkts[half:])
	checkStore(t, s, st, st.pkts)
	if s.Stats().Rolls == 0 {
		t.Fatal("no segment rolled")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, cfg.FS, dir)
	if len(segs) < 5 {
		t.Fatalf("%d segment files, want several", len(segs))
	}
	s, rec = mustOpen(t, dir, cfg)
	defer s.Close()
	if rec.Segments != len(segs) || rec.Packets != uint64(len(st.pkts)) || rec.Contiguous != lastSeq(st.pkts) {
		t.Fatalf("reopen: %+v", rec)
	}
	checkStore(t, s, st, st.pkts)
	if got := s.Epochs(); len(got) != 3 || got[0] != (Epoch{1, 1}) || got[1].Epoch != 2 || got[2].Epoch != 3 {
		t.Fatalf("Epochs = %+v", got)
	}
}

func TestStore_RangeMatchesBruteForce(t *testing.T) {
	onEachFS(t, testStoreRangeMatchesBruteForce)
}

func testStoreRangeMatchesBruteForce(t *testing.T, cfg Config, dir string) {
	st := mixed(2000)
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	appendAll(t, s, st.pkts)
	last := lastSeq(st.pkts)
	for from := uint64(1); from <= last+2; from += 7 {
		for _, span := range []uint64{0, 1, 3, 50, 400, last} {
			to := from + span
			got, infos := collect(s, from, to)
			samePackets(t, "Range", got, expected(st.pkts, from, to))
			for i := range got {
				want := packetInfo(got[i])
				want.EpochEnd = epochEndTable(s.epochs, packetEpoch(got[i]))
				if infos[i] != want {
					t.Fatalf("Range info %+v, packet says %+v", infos[i], want)
				}
			}
		}
	}
	// fn returning false stops the iteration.
	n := 0
	s.Range(1, last, func([]byte, sequencer.PacketInfo) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("Range went on after false: %d calls", n)
	}
	// A callee may patch stable and flags: the store's bytes stay as they were.
	s.Range(1, last, func(p []byte, _ sequencer.PacketInfo) bool {
		wire.SetStable(p, 99)
		wire.SetPacketFlags(p, wire.PacketRetransmit)
		return true
	})
	got, _ := collect(s, 1, last)
	samePackets(t, "Range after patching", got, st.pkts)
	if s.Corruption() != nil {
		t.Fatal(s.Corruption())
	}
}

func TestStore_AppendRefuses(t *testing.T) {
	onEachFS(t, testStoreAppendRefuses)
}

func testStoreAppendRefuses(t *testing.T, cfg Config, dir string) {
	st := mixed(300)
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	appendAll(t, s, st.pkts[:10])
	other := newStream()
	other.session = 77
	other.msg(10)
	other.flush()
	hb, _ := wire.AppendHeartbeat(make([]byte, 64), 1, testSession, 5, 0, 0, 1)
	big := make([]byte, 2000)
	cases := []struct {
		name string
		pkt  []byte
		want error
	}{
		{"duplicate", st.pkts[9], ErrDuplicate},
		{"older duplicate", st.pkts[3], ErrDuplicate},
		{"gap", st.pkts[11], ErrGap},
		{"session", other.pkts[0], ErrSession},
		{"heartbeat", hb, ErrNotData},
		{"too large", big, ErrTooLarge},
		{"malformed", st.pkts[10][:60], wire.ErrRecord},
	}
	for i, c := range cases {
		if err := s.Append(c.pkt); !errors.Is(err, c.want) {
			t.Errorf("%s: Append = %v, want %v", c.name, err, c.want)
		}
		if s.Stats().Refused != uint64(i+1) {
			t.Errorf("%s: Refused = %d", c.name, s.Stats().Refused)
		}
	}
	s.Put(st.pkts[11], packetInfo(st.pkts[11]))
	if !errors.Is(s.Err(), ErrGap) {
		t.Fatalf("Err after a refused Put = %v", s.Err())
	}
	appendAll(t, s, st.pkts[10:])
	checkStore(t, s, st, st.pkts)
}

func TestStore_SyncPolicies(t *testing.T) {
	onEachFS(t, testStoreSyncPolicies)
}

func testStoreSyncPolicies(t *testing.T, base Config, dir string) {
	st := mixed(200)
	for _, pol := range []SyncPolicy{SyncNone, SyncInterval, SyncAlways} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := base
			cfg.Sync = pol
			cfg.SyncBytes = 1 << 30
			s, _ := mustOpen(t, filepath.Join(dir, pol.String()), cfg)
			defer s.Close()
			appendAll(t, s, st.pkts[:5])
			c := packetInfo(st.pkts[4])
			want := map[SyncPolicy]uint64{SyncNone: 0, SyncInterval: 0, SyncAlways: c.LastSeq()}[pol]
			if s.Durable() != want {
				t.Fatalf("Durable after Append = %d, want %d", s.Durable(), want)
			}
			if err := s.Tick(int64(cfg.SyncInterval) / 2); err != nil {
				t.Fatal(err)
			}
			if s.Durable() != want {
				t.Fatalf("Durable before SyncInterval = %d, want %d", s.Durable(), want)
			}
			if err := s.Tick(int64(cfg.SyncInterval)); err != nil {
				t.Fatal(err)
			}
			if pol != SyncNone {
				want = c.LastSeq()
			}
			if s.Durable() != want {
				t.Fatalf("Durable after SyncInterval = %d, want %d", s.Durable(), want)
			}
			if err := s.Sync(); err != nil || s.Durable() != c.LastSeq() {
				t.Fatalf("Durable after Sync = %d (%v)", s.Durable(), err)
			}
		})
	}
	t.Run("interval by bytes", func(t *testing.T) {
		cfg := base
		cfg.Sync = SyncInterval
		cfg.SyncBytes = 4096
		s, _ := mustOpen(t, filepath.Join(dir, "bytes"), cfg)
		defer s.Close()
		appendAll(t, s, st.pkts[:20])
		if s.Durable() == 0 || s.Stats().Fsyncs == 0 {
			t.Fatalf("no fsync after %d bytes (SyncBytes %d)", s.Stats().AppendedBytes, cfg.SyncBytes)
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Sync = 9 },
		func(c *Config) { c.SyncInterval = 0 },
		func(c *Config) { c.SyncBytes = 0 },
		func(c *Config) { c.MaxPacketBytes = 10 },
		func(c *Config) { c.SegmentBytes = 100 },
		func(c *Config) { c.WriteBufferBytes = 100 },
		func(c *Config) { c.ReadBufferBytes = 100 },
		func(c *Config) { c.IndexIntervalBytes = 1 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: Validate = %v", i, err)
		}
		if _, _, err := Open(t.TempDir(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: Open = %v", i, err)
		}
	}
	for _, name := range []string{"none", "interval", "always"} {
		if p, err := ParseSyncPolicy(name); err != nil || p.String() != name {
			t.Errorf("ParseSyncPolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := ParseSyncPolicy("sometimes"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseSyncPolicy(sometimes) = %v", err)
	}
}

func TestStore_ReadOnlyArchive(t *testing.T) {
	onEachFS(t, testStoreReadOnlyArchive)
}

func testStoreReadOnlyArchive(t *testing.T, cfg Config, dir string) {
	st := mixed(500)
	s, _ := mustOpen(t, dir, cfg)
	appendAll(t, s, st.pkts)
	s.Close()
	cfg.ReadOnly = true
	a, _ := mustOpen(t, dir, cfg)
	defer a.Close()
	if got := a.Session(); got != testSession {
		t.Fatalf("Session = %d", got)
	}
	checkStore(t, a, st, st.pkts)
	cfg.Session = testSession + 1
	if _, _, err := Open(dir, cfg); !errors.Is(err, ErrSession) {
		t.Fatalf("Open of another session's directory = %v", err)
	}
	if err := a.Append(st.pkts[0]); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append to an archive = %v", err)
	}
	if segs := segmentFiles(t, cfg.FS, dir); len(segs) == 0 || segs[0] != segmentName(1) {
		t.Fatalf("segment files %v, want %s first", segs, segmentName(1))
	}
}

// TestStore_SyncInShell: with SyncInShell the store never fsyncs on its
// own; the shell's fsync (on another goroutine) makes Durable advance, and
// appends go on while it runs.
func TestStore_SyncInShell(t *testing.T) {
	onEachFS(t, testStoreSyncInShell)
}

func testStoreSyncInShell(t *testing.T, cfg Config, dir string) {
	st := mixed(400)
	cfg.SegmentBytes = 1 << 20
	cfg.Sync = SyncInterval
	cfg.SyncInShell = true
	cfg.SyncBytes = 4096
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	appendAll(t, s, st.pkts[:40])
	if err := s.Tick(int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s.Stats().Fsyncs != 0 || s.Durable() != 0 {
		t.Fatalf("the store fsynced on its own: %+v, durable %d", s.Stats(), s.Durable())
	}
	if !s.SyncDue() {
		t.Fatal("SyncDue false with bytes waiting past SyncInterval")
	}
	r, ok := s.StartSync()
	if !ok || r.Seq != s.Contiguous() {
		t.Fatalf("StartSync = %+v %v, want seq %d", r, ok, s.Contiguous())
	}
	if _, ok := s.StartSync(); ok {
		t.Fatal("a second request while one is out")
	}
	done := make(chan error)
	go func() { done <- r.Run() }()
	appendAll(t, s, st.pkts[40:80]) // meanwhile
	if err := s.FinishSync(r, <-done); err != nil {
		t.Fatal(err)
	}
	if s.Durable() != r.Seq || s.Durable() >= s.Contiguous() {
		t.Fatalf("Durable = %d, want %d (contiguous %d)", s.Durable(), r.Seq, s.Contiguous())
	}
	r, ok = s.StartSync()
	if !ok {
		t.Fatal("no request with bytes waiting")
	}
	if err := s.FinishSync(r, errors.New("EIO")); err == nil {
		t.Fatal("a failed fsync was accepted")
	}
	if err := s.Append(st.pkts[80]); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed fsync = %v", err)
	}
}

// TestStore_SyncInShellRollDefersItsFsyncs: with SyncInShell a segment
// roll fsyncs nothing inline (it stalled the appending loop of a primary
// for up to 150 ms per 128 MiB segment in `seqd bench --sequencers 3`):
// the shell's next request fsyncs the sealed segment, the new one and the
// directory, and only then is the tail durable, which a power loss keeps.
func TestStore_SyncInShellRollDefersItsFsyncs(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.FS = mem
	cfg.SegmentBytes = 16 << 10
	cfg.Sync = SyncInterval
	cfg.SyncInShell = true
	cfg.SyncBytes = 1 << 30
	const dir = "/store"
	st := mixed(200)
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	n := 0
	for ; n < len(st.pkts) && s.Stats().Rolls < 2; n++ {
		if err := s.Append(st.pkts[n]); err != nil {
			t.Fatal(err)
		}
	}
	if s.Stats().Rolls < 2 {
		t.Fatalf("no roll in %d packets", n)
	}
	if s.Stats().Fsyncs != 0 || s.Durable() != 0 {
		t.Fatalf("the store fsynced on its own at a roll: %+v, durable %d", s.Stats(), s.Durable())
	}
	if err := s.Tick(int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !s.SyncDue() {
		t.Fatal("SyncDue false with bytes waiting past SyncInterval")
	}
	r, ok := s.StartSync()
	if !ok {
		t.Fatal("no request after a roll")
	}
	if err := s.FinishSync(r, r.Run()); err != nil {
		t.Fatal(err)
	}
	if s.Durable() != s.Contiguous() {
		t.Fatalf("Durable %d, contiguous %d", s.Durable(), s.Contiguous())
	}
	durable := s.Durable()
	appendAll(t, s, st.pkts[n:n+5]) // not synced: a power loss may take them
	crashed := cfg
	crashed.FS = mem.CrashClone()
	c, rec, err := Open(dir, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rec.Corrupt != nil || rec.Contiguous < durable {
		t.Fatalf("after a power loss: %v, want seqs up to %d held", rec, durable)
	}
	got, _ := collect(c, 1, durable)
	samePackets(t, "Range after a power loss", got, expected(st.pkts[:n], 1, durable))
}
