package replayer

import (
	"math"
	"strings"
	"testing"

	"github.com/seqd/seqd/internal/invariants"
)

// TestStore_InvariantsCatchCorruption: with invariants compiled in (-race
// or -tags invariants) the next Append panics when the store's index or
// write path was broken; each case breaks one on a working store (the
// in-memory state, not the files: bad files are a Corruption, not a
// panic). Where the next Append would mend or step past the break (a new
// index entry), the case calls the check held makes itself.
func TestStore_InvariantsCatchCorruption(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariants are compiled out (build with -race or -tags invariants)")
	}
	cases := []struct {
		name    string
		want    string
		corrupt func(s *Store, seg *segment)
	}{
		{"index seqs go back", "index entry", func(s *Store, seg *segment) {
			seg.idx[len(seg.idx)-2].firstSeq = math.MaxUint64
			s.checkIndex(seg) // what held checks, as a frame is added
		}},
		{"first frame not indexed", "indexes its first frame", func(_ *Store, seg *segment) { seg.idx[0].off += 8 }},
		{"newest index entry out of step", "newest index entry", func(_ *Store, seg *segment) { seg.lastIdx = seg.size }},
		{"index entries lost", "bytes after the newest index entry", func(s *Store, seg *segment) {
			seg.idx = seg.idx[:1]
			seg.lastIdx = seg.idx[0].off
			s.checkIndex(seg) // what held checks, as a frame is added
		}},
		{"reach below an earlier segment", "below the", func(s *Store, _ *segment) { s.segs[len(s.segs)-2].reach = math.MaxUint64 }},
		{"written bytes lost", "waiting", func(_ *Store, seg *segment) { seg.written-- }},
		{"durable beyond the tail", "durable", func(s *Store, _ *segment) { s.durable = math.MaxUint64 }},
	}
	st := mixed(800)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := mustOpen(t, t.TempDir(), testConfig())
			defer s.Close()
			// Append until the next packet goes into the newest segment of
			// several, which has a few index entries.
			n := 0
			var seg *segment
			for ; n < len(st.pkts); n++ {
				if err := s.Append(st.pkts[n]); err != nil {
					t.Fatal(err)
				}
				seg = &s.segs[len(s.segs)-1]
				if len(s.segs) >= 2 && len(seg.idx) >= 3 && seg.size+int64(FrameHeaderBytes+len(st.pkts[n+1])) <= s.cfg.SegmentBytes {
					n++
					break
				}
			}
			defer func() {
				v := recover()
				if msg, _ := v.(string); !strings.Contains(msg, tc.want) {
					t.Fatalf("recovered %v, want a panic containing %q", v, tc.want)
				}
			}()
			tc.corrupt(s, seg)
			s.Append(st.pkts[n])
		})
	}
}
