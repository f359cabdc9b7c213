package standby

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/replayer"
)

// TestStandby_ReopenRestoresTheStateSnapshot: a standby reopened on its
// directory starts its State from the newest snapshot file and applies
// only the records after it, and holds the stream's State; a corrupt
// file, one of another session and one that names another epoch at its
// seq (a store cut since) are not believed (said why, removed), and the
// State is still the stream's.
func TestStandby_ReopenRestoresTheStateSnapshot(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 40)
	cfg := standbyConfig(t, 2)
	cfg.SnapshotEveryRecords = 8
	s := newStandby(t, cfg, &standbytest.Client{})
	for _, p := range pkts {
		s.frame(p, 0)
	}
	top := src.Core.Published()
	want := standbytest.ReferenceState(t, pkts, top).Snapshot()
	if st := s.Stats(); st.SnapshotsWritten < 2 || st.SnapshotWriteErrs != 0 {
		t.Fatalf("snapshot files written %d, errors %d: want at least 2, none", st.SnapshotsWritten, st.SnapshotWriteErrs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopen := func() *Agent {
		t.Helper()
		r := newStandby(t, cfg, &standbytest.Client{})
		if seq, snap := r.Snapshot(); seq != top || !bytes.Equal(snap, want) {
			t.Fatalf("reopened: State at %d (want %d) differs from the stream's", seq, top)
		}
		return r
	}
	r := reopen()
	o := r.Opened()
	if o.RestoredFrom == 0 || o.RestoredFrom > top || o.Applied != top-o.RestoredFrom || len(o.Rejected) != 0 {
		t.Fatalf("reopened from %+v: want a snapshot file at most %d seqs below %d, the rest applied, none rejected", o, cfg.SnapshotEveryRecords, top)
	}
	if top-o.RestoredFrom >= 2*cfg.SnapshotEveryRecords {
		t.Fatalf("restored from seq %d of %d: not the newest file", o.RestoredFrom, top)
	}
	r.Close()

	newest := func() string {
		t.Helper()
		var name string
		var best uint64
		for _, n := range snapFileNames {
			d, err := readSnapFile(snapFSOf(cfg), filepath.Join(cfg.Dir, n))
			if err == nil && d.seq >= best {
				name, best = n, d.seq
			}
		}
		if name == "" {
			t.Fatal("no snapshot file")
		}
		return filepath.Join(cfg.Dir, name)
	}
	spoil := func(why string, edit func(b []byte) []byte) {
		t.Helper()
		path := newest()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
		r := reopen()
		o := r.Opened()
		r.Close()
		if len(o.Rejected) == 0 || !errors.Is(o.Rejected[0], errSnapFile) || !strings.Contains(o.Rejected[0].Error(), why) {
			t.Fatalf("a spoiled file (%s): rejected %v", why, o.Rejected)
		}
		// The rejected file is gone (or written again whole by the
		// rebuild): the next open believes every file it finds.
		r = reopen()
		o = r.Opened()
		r.Close()
		if len(o.Rejected) != 0 || o.RestoredFrom == 0 {
			t.Fatalf("the open after a rejected file (%s): %+v, want a file believed and none rejected", why, o)
		}
	}
	spoil("CRC mismatch", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
	spoil("session", func(b []byte) []byte {
		d, _ := decodeSnapFile(b)
		d.session++
		return encodeSnapFile(d)
	})
	spoil("cut since", func(b []byte) []byte {
		d, _ := decodeSnapFile(b)
		d.epoch++
		return encodeSnapFile(d)
	})
	// With no file left the State is rebuilt from seq 1, as before.
	for _, n := range snapFileNames {
		_ = os.Remove(filepath.Join(cfg.Dir, n))
	}
	r = reopen()
	if o := r.Opened(); o.RestoredFrom != 0 || o.Applied != top {
		t.Fatalf("without files: %+v, want every record applied from seq 1", o)
	}
}

// BenchmarkStandby_Reopen: the time a standby takes to open a store of
// 200k records and rebuild its State, from seq 1 (no snapshot file) and
// from the newest snapshot file (restart time that grew with the
// session, issue 14 item 13).
func BenchmarkStandby_Reopen(b *testing.B) {
	const n = 200_000
	src := standbytest.NewStream(b)
	pkts := src.Commands(b, n)
	cfg := standbyConfig(b, 2)
	cfg.SnapshotEveryRecords = n / 4
	s, err := New(cfg, &standbytest.Client{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pkts {
		s.frame(p, 0)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	cfg.SnapshotEveryRecords = 1 << 30 // no file written by the reopens
	files := map[string][]byte{}
	for _, name := range snapFileNames {
		p := filepath.Join(cfg.Dir, name)
		if data, err := os.ReadFile(p); err == nil {
			files[p] = data
		}
	}
	for _, from := range []string{"seq_1", "snapshot"} {
		b.Run("from="+from, func(b *testing.B) {
			for range b.N {
				for p, data := range files {
					_ = os.Remove(p)
					if from == "snapshot" {
						_ = os.WriteFile(p, data, 0o644)
					}
				}
				r, err := New(cfg, &standbytest.Client{})
				if err != nil {
					b.Fatal(err)
				}
				if o := r.Opened(); (from == "snapshot") != (o.RestoredFrom > 0) || r.Contiguous() != src.Core.Published() {
					b.Fatalf("opened %+v holding %d", o, r.Contiguous())
				}
				r.Close()
			}
		})
	}
}

// TestStandby_CorruptStoreRefusedAtOpen: a byte flipped inside the
// store's segment stops the standby when it opens, with an error that
// names the segment and the way out, not at its first append after it
// answered seals and acked.
func TestStandby_CorruptStoreRefusedAtOpen(t *testing.T) {
	src := standbytest.NewStream(t)
	cfg := storeHolding(t, 2, src.Commands(t, 40))
	seg := filepath.Join(cfg.Dir, "0000000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, &standbytest.Client{})
	if err == nil {
		s.Close()
		t.Fatal("a corrupt store opened")
	}
	if !errors.Is(err, replayer.ErrCorrupt) || !strings.Contains(err.Error(), "0000000001.seg") || !strings.Contains(err.Error(), "move "+cfg.Dir+" aside") {
		t.Fatalf("corrupt store: %v, want ErrCorrupt naming the segment and the way out", err)
	}
}
