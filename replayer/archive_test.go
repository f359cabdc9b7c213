package replayer

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// dirState is every file of dir with its size, mode, mtime and content
// hash: what an archive reader must leave as it found it.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprintf("%v %v %d %x", fi.Mode(), fi.ModTime(), len(b), sha256.Sum256(b))
	}
	return out
}

// TestOpenArchive_ReadsWithoutChanging: an archive written with another
// Config (small segments and packets), holding an epoch restart and a torn
// tail, opens with OpenArchive: the tail is reported and left in place,
// the surviving stream is served, appends fail, and no file changes.
func TestOpenArchive_ReadsWithoutChanging(t *testing.T) {
	const n, cut, m = 1500, 1400, 2500
	st := cutStream(n, cut, m)
	dir := writeStore(t, st)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	last := segs[len(segs)-1]
	appendToFile(t, last, []byte{9, 9, 9, 9, 9}) // a frame a writer began
	before := dirState(t, dir)
	s, rec, err := OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rec)
	if len(rec.Cuts) != 1 || rec.Cuts[0].File != last || rec.Corrupt != nil || rec.Contiguous != m {
		t.Fatalf("recovery %s", rec)
	}
	checkRecords(t, s, 1, m, cut)
	if err := s.Append(st.pkts[len(st.pkts)-1]); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Append = %v, want ErrReadOnly", err)
	}
	if err := s.Tick(int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := dirState(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("OpenArchive changed the directory")
	}
}

// TestOpenArchive_CorruptByteNamedNothingPast: a byte flipped in a frame
// of the new epoch is named with the seq of the frame's first record;
// Records serves every seq before it and none from it on, and the file
// is left as it was for inspection.
func TestOpenArchive_CorruptByteNamedNothingPast(t *testing.T) {
	const n, cut, m = 1500, 1400, 2500
	st := cutStream(n, cut, m)
	dir := writeStore(t, st)
	locs := locate(t, dir)
	var bad frameLoc
	var p wire.Packet
	for _, l := range locs {
		if err := wire.DecodePacket(st.pkts[l.pkt], &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch == 2 && p.FirstSeq > cut+200 {
			bad = l
			break
		}
	}
	flip(t, bad.path, bad.off+int64(bad.n)-2)
	badSeq := packetInfo(st.pkts[bad.pkt]).FirstSeq
	before := dirState(t, dir)
	s, rec, err := OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec.Corrupt == nil || rec.Corrupt.Seq != badSeq || rec.Corrupt.File != bad.path || rec.Corrupt.Offset != bad.off {
		t.Fatalf("recovery %s; want seq %d at %s:%d", rec, badSeq, bad.path, bad.off)
	}
	checkRecords(t, s, 1, badSeq-1, cut)
	s.Records(badSeq-1, m, func(r *wire.Record, _ uint32) bool {
		if r.Seq >= badSeq {
			t.Fatalf("seq %d served at or past the corrupt seq %d", r.Seq, badSeq)
		}
		return true
	})
	if after := dirState(t, dir); !reflect.DeepEqual(before, after) {
		t.Fatalf("OpenArchive changed the directory")
	}
}

// TestOpenArchive_LiveDirectory: a directory a Store is still appending to
// opens read-only at any moment and serves a gap-free prefix of what was
// written, every record whole and right.
func TestOpenArchive_LiveDirectory(t *testing.T) {
	const n, cut, m = 1500, 1400, 2500
	st := cutStream(n, cut, m)
	dir := t.TempDir()
	w, _ := mustOpen(t, dir, testConfig())
	defer w.Close()
	for i, pkt := range st.pkts {
		if err := w.Append(pkt); err != nil {
			t.Fatal(err)
		}
		if i%7 != 0 {
			continue
		}
		if err := w.Tick(int64(i)); err != nil { // hands frames to the OS
			t.Fatal(err)
		}
		if i%91 != 0 {
			continue
		}
		s, rec, err := OpenArchive(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Corrupt != nil {
			t.Fatalf("packet %d: %s", i, rec)
		}
		if c := s.Contiguous(); c > 0 {
			checkRecords(t, s, 1, c, cut)
		}
		s.Close()
	}
}
