package replayer

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
)

// allocated is the disk space a file holds (its blocks), and its size.
func allocated(t *testing.T, path string) (blocks, size int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512, st.Size
}

// The active segment's blocks are reserved to SegmentBytes (its size
// unchanged, so a reopening store and the readers see the same file);
// the roll that seals it and Close give the ones past its end back, and
// a reopened store reserves the segment it appends to again.
func TestStore_PreallocatesTheActiveSegment(t *testing.T) {
	cfg := testConfig()
	cfg.FS = vfs.Default
	cfg.SegmentBytes = 1 << 20
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	f, err := vfs.Default.Create(probe, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	perr := vfs.Preallocate(f, 1<<20)
	f.Close()
	if perr != nil {
		t.Skipf("the file system of %s reserves no blocks: %v", dir, perr)
	}
	st := newStream()
	for st.next <= 12000 { // about 2.5 MiB: two rolls
		st.msg(200)
	}
	st.flush()
	half := len(st.pkts) / 2
	s, _ := mustOpen(t, dir, cfg)
	appendAll(t, s, st.pkts[:half])
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, cfg.FS, dir)
	if len(segs) < 2 {
		t.Fatalf("%d segments, want a roll", len(segs))
	}
	for i, name := range segs {
		blocks, size := allocated(t, filepath.Join(dir, name))
		last := i == len(segs)-1
		switch {
		case last && (blocks < cfg.SegmentBytes || size >= cfg.SegmentBytes):
			t.Errorf("active segment %s: %d bytes, %d allocated: want its blocks reserved to %d past its end", name, size, blocks, cfg.SegmentBytes)
		case !last && blocks > size+64<<10:
			t.Errorf("sealed segment %s: %d bytes, %d allocated: the reservation past its end was not given back", name, size, blocks)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	name := segs[len(segs)-1]
	if blocks, size := allocated(t, filepath.Join(dir, name)); blocks > size+64<<10 {
		t.Fatalf("after Close, %s: %d bytes, %d allocated: want the reservation given back", name, size, blocks)
	}
	s, rec := mustOpen(t, dir, cfg)
	if rec.Packets != uint64(half) {
		t.Fatalf("reopen: %+v", rec)
	}
	if blocks, _ := allocated(t, filepath.Join(dir, name)); blocks < cfg.SegmentBytes {
		t.Fatalf("reopened active segment %s: %d allocated, want %d reserved", name, blocks, cfg.SegmentBytes)
	}
	appendAll(t, s, st.pkts[half:])
	checkStore(t, s, st, st.pkts)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, rec = mustOpen(t, dir, cfg)
	defer s.Close()
	if rec.Packets != uint64(len(st.pkts)) || len(rec.Cuts) != 0 || rec.Corrupt != nil {
		t.Fatalf("reopen: %+v", rec)
	}
	checkStore(t, s, st, st.pkts)
}
