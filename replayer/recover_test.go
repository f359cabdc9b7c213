package replayer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqd/seqd/wire"
)

// frameLoc is where a packet sits on disk.
type frameLoc struct {
	path string
	off  int64
	n    int
	pkt  int // index in the appended packets
}

// locate lists the frames of the store in dir, in order.
func locate(t *testing.T, dir string) []frameLoc {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	var out []frameLoc
	var p wire.Packet
	for _, path := range segs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := SegmentHeaderBytes; off < len(b); {
			n, _, err := decodeFrame(b[off:], MaxFramePacketBytes, &p)
			if err != nil {
				t.Fatalf("%s at %d: %v", path, off, err)
			}
			out = append(out, frameLoc{path: path, off: int64(off), n: n, pkt: len(out)})
			off += n
		}
	}
	return out
}

// writeStore makes a closed store in a new directory holding st's packets.
func writeStore(t *testing.T, st *stream) string {
	t.Helper()
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, testConfig())
	appendAll(t, s, st.pkts)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func appendToFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestRecover_TornTailCut(t *testing.T) {
	st := mixed(1500)
	held := len(st.pkts) - 1 // the last packet is the one torn
	next := st.pkts[held]
	frame := make([]byte, FrameHeaderBytes+len(next))
	putFrame(frame, next, packetInfo(next).FirstSeq)
	header := make([]byte, SegmentHeaderBytes)
	putSegmentHeader(header, &segmentHeader{Session: testSession, Ordinal: 99, FirstSeq: packetInfo(next).FirstSeq})
	cases := []struct {
		name string
		tear func(t *testing.T, dir, last string) // last: the newest segment
		file bool                                 // a whole segment file is cut
	}{
		{"half a frame", func(t *testing.T, _, last string) { appendToFile(t, last, frame[:len(frame)/2]) }, false},
		{"part of a frame header", func(t *testing.T, _, last string) { appendToFile(t, last, frame[:7]) }, false},
		{"all but one byte", func(t *testing.T, _, last string) { appendToFile(t, last, frame[:len(frame)-1]) }, false},
		{"zeros", func(t *testing.T, _, last string) { appendToFile(t, last, make([]byte, 4096)) }, false},
		{"new segment, torn header", func(t *testing.T, dir, last string) {
			os.WriteFile(filepath.Join(dir, nextSegment(t, last)), header[:30], 0o644)
		}, true},
		{"new segment, header only", func(t *testing.T, dir, last string) {
			h := make([]byte, SegmentHeaderBytes)
			putSegmentHeader(h, &segmentHeader{Session: testSession, Ordinal: ordinalOf(t, last) + 1, FirstSeq: packetInfo(next).FirstSeq})
			os.WriteFile(filepath.Join(dir, nextSegment(t, last)), h, 0o644)
		}, true},
		{"new segment, half a frame", func(t *testing.T, dir, last string) {
			h := make([]byte, SegmentHeaderBytes)
			putSegmentHeader(h, &segmentHeader{Session: testSession, Ordinal: ordinalOf(t, last) + 1, FirstSeq: packetInfo(next).FirstSeq})
			os.WriteFile(filepath.Join(dir, nextSegment(t, last)), append(h, frame[:40]...), 0o644)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeStore(t, &stream{pkts: st.pkts[:held]})
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			last := segs[len(segs)-1]
			before := size(t, last)
			c.tear(t, dir, last)
			s, rec := mustOpen(t, dir, testConfig())
			defer s.Close()
			if len(rec.Cuts) != 1 || rec.Corrupt != nil {
				t.Fatalf("recovery: %s", rec)
			}
			cut := rec.Cuts[0]
			if want := lastSeq(st.pkts[:held]); cut.AfterSeq != want || rec.Contiguous != want {
				t.Fatalf("cut after seq %d, contiguous %d, want %d", cut.AfterSeq, rec.Contiguous, want)
			}
			if c.file {
				if _, err := os.Stat(cut.File); !os.IsNotExist(err) || cut.Offset != 0 {
					t.Fatalf("torn segment %s still there (%v), cut %+v", cut.File, err, cut)
				}
			} else if cut.File != last || cut.Offset != before || size(t, last) != before {
				t.Fatalf("cut %+v; file now %d bytes, want %d", cut, size(t, last), before)
			}
			checkStore(t, s, st, st.pkts[:held])
			// The store goes on from the cut.
			appendAll(t, s, st.pkts[held:])
			checkStore(t, s, st, st.pkts)
			s.Close()
			s2, rec := mustOpen(t, dir, testConfig())
			defer s2.Close()
			if len(rec.Cuts) != 0 || rec.Corrupt != nil {
				t.Fatalf("second recovery: %s", rec)
			}
			checkStore(t, s2, st, st.pkts)
		})
	}
}

func ordinalOf(t *testing.T, path string) uint64 {
	o, ok := parseSegmentName(filepath.Base(path))
	if !ok {
		t.Fatalf("not a segment: %s", path)
	}
	return o
}

func nextSegment(t *testing.T, last string) string { return segmentName(ordinalOf(t, last) + 1) }

// TestRecover_TornTailReadOnly: an archive opened read-only reports a torn
// tail without touching the file.
func TestRecover_TornTailReadOnly(t *testing.T) {
	st := mixed(300)
	dir := writeStore(t, st)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	last := segs[len(segs)-1]
	appendToFile(t, last, []byte{1, 2, 3})
	before := size(t, last)
	cfg := testConfig()
	cfg.ReadOnly = true
	s, rec := mustOpen(t, dir, cfg)
	defer s.Close()
	if len(rec.Cuts) != 1 || size(t, last) != before {
		t.Fatalf("recovery %s; file %d bytes, was %d", rec, size(t, last), before)
	}
	checkStore(t, s, st, st.pkts)
}

func TestRecover_CorruptByteNamedWithSeqNeverServed(t *testing.T) {
	st := mixed(2000)
	cases := []struct {
		name  string
		where func(locs []frameLoc, segs []string) (loc frameLoc, at int64)
	}{
		{"payload, middle segment", func(locs []frameLoc, segs []string) (frameLoc, int64) {
			l := middleFrame(locs, segs[1])
			return l, l.off + int64(l.n) - 3
		}},
		{"packet header, middle segment", func(locs []frameLoc, segs []string) (frameLoc, int64) {
			l := middleFrame(locs, segs[2])
			return l, l.off + FrameHeaderBytes + 25 // firstSeq
		}},
		{"frame length, newest segment", func(locs []frameLoc, segs []string) (frameLoc, int64) {
			l := middleFrame(locs, segs[len(segs)-1])
			return l, l.off + 5
		}},
		{"checksum, first frame of a segment", func(locs []frameLoc, segs []string) (frameLoc, int64) {
			for _, l := range locs {
				if l.path == segs[3] {
					return l, l.off
				}
			}
			panic("no frame")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeStore(t, st)
			locs := locate(t, dir)
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			if len(segs) < 4 {
				t.Fatalf("%d segments", len(segs))
			}
			loc, at := c.where(locs, segs)
			flip(t, loc.path, at)
			s, rec := mustOpen(t, dir, testConfig())
			defer s.Close()
			bad := packetInfo(st.pkts[loc.pkt])
			if rec.Corrupt == nil || rec.Corrupt.Seq != bad.FirstSeq || rec.Corrupt.File != loc.path || rec.Corrupt.Offset != loc.off {
				t.Fatalf("recovery %s; want the frame at %s:%d (seq %d) named", rec, loc.path, loc.off, bad.FirstSeq)
			}
			if !errors.Is(rec.Corrupt, ErrCorrupt) || s.Corruption() != rec.Corrupt || len(rec.Cuts) != 0 {
				t.Fatalf("Corruption() = %v", s.Corruption())
			}
			assertServedPrefix(t, s, st.pkts, loc.pkt)
			if err := s.Append(st.pkts[len(st.pkts)-1]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Append to a corrupt store = %v", err)
			}
		})
	}
}

// assertServedPrefix checks that s serves exactly pkts[:n] and nothing of
// pkts[n:], whatever is asked.
func assertServedPrefix(t *testing.T, s *Store, pkts [][]byte, n int) {
	t.Helper()
	got, _ := collect(s, 1, lastSeq(pkts)+10)
	samePackets(t, "Range over a corrupt store", got, pkts[:n])
	badInfo := packetInfo(pkts[n])
	if got, _ := collect(s, badInfo.FirstSeq, lastSeq(pkts)); len(got) != 0 && !equalAny(got, pkts[:n]) {
		t.Fatalf("Range from the corrupt seq served %d packets not held before it", len(got))
	}
	if s.Contiguous() >= badInfo.FirstSeq || s.Durable() >= badInfo.FirstSeq {
		t.Fatalf("Contiguous %d, Durable %d at or past the corrupt seq %d", s.Contiguous(), s.Durable(), badInfo.FirstSeq)
	}
	if _, ok := s.EpochOf(badInfo.FirstSeq); ok && badInfo.FirstSeq > s.Contiguous()+1 {
		t.Fatalf("EpochOf(%d) answered for a seq not served", badInfo.FirstSeq)
	}
}

func equalAny(got, pkts [][]byte) bool {
	for _, g := range got {
		ok := false
		for _, p := range pkts {
			if string(g) == string(p) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func middleFrame(locs []frameLoc, path string) frameLoc {
	var in []frameLoc
	for _, l := range locs {
		if l.path == path {
			in = append(in, l)
		}
	}
	return in[len(in)/2]
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestStore_CorruptAfterOpenNeverServed: bytes that change on disk after
// Open are caught by the checksum when read, named, and never served.
func TestStore_CorruptAfterOpenNeverServed(t *testing.T) {
	st := mixed(2000)
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	locs := locate(t, dir)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	loc := middleFrame(locs, segs[2])
	flip(t, loc.path, loc.off+int64(loc.n)/2)
	// Read the newest segment first so that nothing of segment 3 is cached.
	collect(s, lastSeq(st.pkts), lastSeq(st.pkts))
	bad := packetInfo(st.pkts[loc.pkt])
	got, _ := collect(s, 1, lastSeq(st.pkts))
	samePackets(t, "Range reaching the corrupt frame", got, st.pkts[:loc.pkt])
	c := s.Corruption()
	if c == nil || c.Seq != bad.FirstSeq || c.File != loc.path || c.Offset != loc.off {
		t.Fatalf("Corruption() = %v, want seq %d at %s:%d", c, bad.FirstSeq, loc.path, loc.off)
	}
	assertServedPrefix(t, s, st.pkts, loc.pkt)
	if n, _ := s.Newest(); n != packetInfo(st.pkts[loc.pkt-1]) {
		t.Fatalf("Newest = %+v, want the packet before the corrupt one", n)
	}
	if err := s.Append(st.pkts[0]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Append = %v", err)
	}
}

// TestRecover_MissingSegment: a segment file removed from the middle is
// named, and nothing after it is served.
func TestRecover_MissingSegment(t *testing.T) {
	st := mixed(1500)
	dir := writeStore(t, st)
	locs := locate(t, dir)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	os.Remove(segs[2])
	first := 0
	for first < len(locs) && locs[first].path != segs[2] {
		first++
	}
	s, rec := mustOpen(t, dir, testConfig())
	defer s.Close()
	if rec.Corrupt == nil || rec.Corrupt.Seq != packetInfo(st.pkts[first]).FirstSeq {
		t.Fatalf("recovery %s; want seq %d named", rec, packetInfo(st.pkts[first]).FirstSeq)
	}
	assertServedPrefix(t, s, st.pkts, first)
}
