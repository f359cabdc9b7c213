package sequencer

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/internal/invariants"
)

// mustPanic runs f and fails unless it panics with a message containing
// want.
func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		if s, _ := v.(string); !strings.Contains(s, want) {
			t.Fatalf("recovered %v, want a panic containing %q", v, want)
		}
	}()
	f()
}

// TestCore_InvariantsCatchCorruption: with invariants compiled in (-race
// or -tags invariants) the next call into the Core panics when its
// positions, its open packet or its ring were broken; each case breaks
// one on a working Core.
func TestCore_InvariantsCatchCorruption(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariants are compiled out (build with -race or -tags invariants)")
	}
	cases := []struct {
		name    string
		want    string
		corrupt func(c *Core)
	}{
		{"stable past published", "want sent <= stable <= published", func(c *Core) { c.stable = c.published + 1 }},
		{"tail at next seq", "want published <= tail < next", func(c *Core) { c.tail = c.nextSeq }},
		{"a seq lost from the open packet", "open packet holds seqs", func(c *Core) { c.nextSeq++ }},
		{"open packet after a hole", "open packet starts at", func(c *Core) { c.openInfo.FirstSeq++; c.nextSeq++ }},
		{"ring ahead of the tail", "the ring's newest packet ends", func(c *Core) { c.ring.entry(c.ring.next-1).count++ }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCore(t, testConfig())
			for i := uint64(1); i <= 40; i++ {
				mustStep(t, c, 1000*int64(i), frame(t, acctA, 1, 0, cmd(i, strings.Repeat("x", 100))))
				if i%7 == 0 {
					c.Flush(at(1000 * int64(i)))
				}
			}
			if !c.open || c.ring.next-c.ring.first < 2 {
				t.Fatalf("set-up: open %v, %d packets in the ring", c.open, c.ring.next-c.ring.first)
			}
			tc.corrupt(c.Core)
			mustPanic(t, tc.want, func() { c.Flush(at(50_000)) })
		})
	}
}

// TestRing_InvariantsCatchCorruption: a commit panics when the ring's
// entries or positions were broken.
func TestRing_InvariantsCatchCorruption(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariants are compiled out (build with -race or -tags invariants)")
	}
	cases := []struct {
		name    string
		want    string
		corrupt func(r *ring)
	}{
		{"packets overlap", "overlaps the next", func(r *ring) { r.entry(r.next - 1).n += 64 }},
		{"seqs go back", "after one of", func(r *ring) { r.entry(r.next - 1).firstSeq += 10 }},
		{"head not at the oldest packet", "ring head", func(r *ring) { r.head++ }},
		{"more bytes than RingBytes", "more than RingBytes", func(r *ring) { r.limit = 10 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r ring
			r.init(64<<10, 1472)
			pkt := make([]byte, 200)
			for seq := uint64(1); seq <= 5; seq++ {
				r.Put(pkt, PacketInfo{FirstSeq: seq, Count: 1})
			}
			tc.corrupt(&r)
			mustPanic(t, tc.want, func() { r.Put(pkt, PacketInfo{FirstSeq: 6, Count: 1}) })
		})
	}
}
