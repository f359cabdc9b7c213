package main

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// checkStream runs a checker over a stream: "i" is an incarnation
// announcement of account A/1, a number n is A/1's command n.
func checkStream(t *testing.T, items ...any) error {
	t.Helper()
	k := checker{senders: map[uint64]uint64{}}
	a := wire.MustAccount("A")
	for i, it := range items {
		m := &node.Message{Seq: uint64(i + 1), Account: a, Instance: 1}
		switch v := it.(type) {
		case string:
			var buf [wire.InternalBytes]byte
			p, err := wire.AppendInternal(buf[:], &wire.Internal{Type: wire.InternalIncarnation, Account: a, Instance: 1, Value: uint64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			m.Flags = wire.FlagInternal
			m.Account, m.Instance = 0, 0
			m.Payload = p
		case int:
			m.CmdSeq = uint64(v)
		}
		k.check(m)
	}
	return k.err
}

func TestChecker_IncarnationMustStartAtCommandOne(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items []any
		want  string // "" = accepted
	}{
		{"two lives from 1", []any{"i", 1, 2, 3, "i", 1, 2}, ""},
		{"first life misses command 1", []any{"i", 2, 3}, "want 1"},
		{"new life misses command 1", []any{"i", 1, 2, "i", 2, 3}, "want 1"},
		{"gap inside a life", []any{"i", 1, 3}, "lost or duplicated"},
		{"repeat inside a life", []any{"i", 1, 1}, "lost or duplicated"},
	} {
		err := checkStream(t, tc.items...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: rejected: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
