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
	k := checker{}
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

// Accounts that differ only in their eighth byte are two senders (the old
// key, account<<8|instance, lost that byte), and interleaved senders
// each keep their own count.
func TestChecker_SendersKeptApart(t *testing.T) {
	var k checker
	a, b := wire.MustAccount("ABCDEFGH"), wire.MustAccount("ABCDEFGX")
	seq := uint64(0)
	for _, s := range []struct {
		acct wire.Account
		cmd  uint64
	}{{a, 1}, {b, 1}, {a, 2}, {a, 3}, {b, 2}, {b, 3}, {a, 4}} {
		seq++
		k.check(&node.Message{Seq: seq, Account: s.acct, Instance: 1, CmdSeq: s.cmd})
		if k.err != nil {
			t.Fatalf("seq %d: %v", seq, k.err)
		}
	}
	seq++
	k.check(&node.Message{Seq: seq, Account: b, Instance: 1, CmdSeq: 3})
	if k.err == nil {
		t.Fatal("a repeated command of the second sender passed")
	}
}
