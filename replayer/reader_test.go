package replayer

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
)

// readAll reads r until it has a packet whose last seq is at least to,
// returning copies of the packets.
func readAll(t testing.TB, r *Reader, to uint64, tip *Tip, done <-chan struct{}) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		run, err := r.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(run) == 0 {
			if len(out) > 0 && lastSeq(out) >= to {
				return out
			}
			select {
			case <-done:
				if tip.Seq() < to {
					t.Fatalf("writer done at tip seq %d, want %d", tip.Seq(), to)
				}
			default:
			}
			continue
		}
		for len(run) > 0 {
			n, _ := frameLen(run, 1<<20)
			out = append(out, append([]byte(nil), run[FrameHeaderBytes:n]...))
			run = run[n:]
		}
	}
}

// TestReader_FollowsConcurrentAppends: readers on other goroutines read
// every packet from their seq on, byte for byte, while the store's
// goroutine appends, flushes and rolls segments (run with -race).
func TestReader_FollowsConcurrentAppends(t *testing.T) {
	onEachFS(t, testReaderFollowsConcurrentAppends)
}

func testReaderFollowsConcurrentAppends(t *testing.T, base Config, root string) {
	st := mixed(3000)
	dir := filepath.Join(root, "1")
	s, _ := mustOpen(t, dir, base)
	defer s.Close()
	last := lastSeq(st.pkts)
	tip := s.Tip()
	done := make(chan struct{})
	froms := []uint64{1, 2, 500, 1501, last - 3, last}
	var wg sync.WaitGroup
	got := make([][][]byte, len(froms))
	for i, from := range froms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := NewReader(tip, from, 4<<10)
			defer r.Close()
			got[i] = readAll(t, r, last, tip, done)
		}()
	}
	for i, p := range st.pkts {
		if err := s.Append(p); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if i%7 == 0 {
			if err := s.Tick(int64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Tick(1 << 40); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	if s.Stats().Rolls < 3 {
		t.Fatalf("only %d segments: the test must cross rolls", s.Stats().Rolls)
	}
	for i, from := range froms {
		samePackets(t, "from "+itoa(from), got[i], expected(st.pkts, from, last))
	}
}

func itoa(v uint64) string { return string(appendUint(nil, v)) }

func appendUint(b []byte, v uint64) []byte {
	if v >= 10 {
		b = appendUint(b, v/10)
	}
	return append(b, byte('0'+v%10))
}

// TestReader_ReopenedArchive: a Reader of a store opened read-only reads
// everything, and a seq below the oldest segment is ErrGone.
func TestReader_ReopenedArchive(t *testing.T) {
	st := mixed(2000)
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, testConfig())
	appendAll(t, s, st.pkts)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.ReadOnly = true
	a, _ := mustOpen(t, dir, cfg)
	defer a.Close()
	last := lastSeq(st.pkts)
	r := NewReader(a.Tip(), 1, 0)
	samePackets(t, "archive", readAll(t, r, last, a.Tip(), nil), expected(st.pkts, 1, last))
	r.Close()

	// Remove the first segment by hand: seq 1 is gone, the rest is served.
	if err := os.Remove(filepath.Join(dir, segmentName(1))); err != nil {
		t.Fatal(err)
	}
	b, _ := mustOpen(t, dir, cfg)
	defer b.Close()
	r = NewReader(b.Tip(), 1, 0)
	if _, err := r.Next(); !errors.Is(err, ErrGone) {
		t.Fatalf("Next from 1 after removing segment 1: %v, want ErrGone", err)
	}
	oldest, _ := b.Oldest()
	r = NewReader(b.Tip(), oldest.FirstSeq+1, 0)
	samePackets(t, "after removal", readAll(t, r, last, b.Tip(), nil), expected(st.pkts, oldest.FirstSeq+1, last))
}

// TestReader_CorruptByteNamed: a byte changed in a segment after the store
// was opened stops the Reader with a Corruption naming the seq; nothing at
// or after it is returned.
func TestReader_CorruptByteNamed(t *testing.T) {
	st := mixed(1000)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	appendAll(t, s, st.pkts)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	victim := st.pkts[40]
	seq := packetInfo(victim).FirstSeq
	// Find the frame of packet 40 and flip a payload byte.
	path := filepath.Join(dir, segmentName(1))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(SegmentHeaderBytes)
	for i := 0; i < 40; i++ {
		off += int64(FrameHeaderBytes + len(st.pkts[i]))
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^b[off+FrameHeaderBytes+70]}, off+FrameHeaderBytes+70); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := NewReader(s.Tip(), 1, 0)
	var n int
	for {
		run, err := r.Next()
		if err != nil {
			var c *Corruption
			if !errors.As(err, &c) || c.Seq != seq || c.Offset != off {
				t.Fatalf("err %v, want a Corruption at seq %d offset %d", err, seq, off)
			}
			break
		}
		if len(run) == 0 {
			t.Fatal("reader reached the tip past a corrupt frame")
		}
		for len(run) > 0 {
			k, _ := frameLen(run, 1<<20)
			if packetInfo(run[FrameHeaderBytes:k]).FirstSeq >= seq {
				t.Fatalf("served the corrupt frame's seq %d", seq)
			}
			run = run[k:]
			n++
		}
	}
	if n != 40 {
		t.Fatalf("served %d packets before the corruption, want 40", n)
	}
}

// TestReader_NextAllocatesNothing: reading frames allocates nothing once
// the segment is open.
func TestReader_NextAllocatesNothing(t *testing.T) {
	st := mixed(3000)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 20
	s, _ := mustOpen(t, dir, cfg)
	defer s.Close()
	appendAll(t, s, st.pkts)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(s.Tip(), 1, 16<<10)
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Next allocates %v per call", allocs)
	}
}

// FuzzReader: whatever bytes a segment holds after a valid header, a
// Reader never panics, never reads past the published position, and
// returns only frames that pass their checks (or stops with an error).
func FuzzReader(f *testing.F) {
	st := mixed(50)
	var seed []byte
	for _, p := range st.pkts[:5] {
		b := make([]byte, FrameHeaderBytes+len(p))
		putFrame(b, p, packetInfo(p).FirstSeq)
		seed = append(seed, b...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		hdr := make([]byte, SegmentHeaderBytes)
		putSegmentHeader(hdr, &segmentHeader{Session: testSession, Ordinal: 1, FirstSeq: 1})
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), append(hdr, data...), 0o644); err != nil {
			t.Fatal(err)
		}
		tip := &Tip{dir: dir, fs: vfs.Default, maxPacket: 1472}
		tip.publish(1, int64(SegmentHeaderBytes+len(data)), 1, testSession)
		r := NewReader(tip, 1, 4096)
		defer r.Close()
		read := 0
		for i := 0; i < 1000; i++ {
			run, err := r.Next()
			if err != nil || len(run) == 0 {
				break
			}
			read += len(run)
			for len(run) > 0 {
				n, err := frameLen(run, 1472)
				if err != nil || n > len(run) {
					t.Fatalf("returned a run that does not split into frames: %v", err)
				}
				if _, err := checkFrame(run[:n]); err != nil {
					t.Fatalf("returned a frame that fails its check: %v", err)
				}
				run = run[n:]
			}
		}
		if read > len(data) {
			t.Fatalf("read %d bytes of %d", read, len(data))
		}
	})
}
