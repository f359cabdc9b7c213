package check

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// checkStream runs a Stream over a stream: "i" is an incarnation
// announcement of account A/1, a number n is A/1's command n; it returns
// the first fault (as `seqd node` reports it).
func checkStream(t *testing.T, items ...any) error {
	t.Helper()
	var k Stream
	var first error
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
		if err := k.Observe(m).Err(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func TestStream_IncarnationMustStartAtCommandOne(t *testing.T) {
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
func TestStream_SendersKeptApart(t *testing.T) {
	var k Stream
	a, b := wire.MustAccount("ABCDEFGH"), wire.MustAccount("ABCDEFGX")
	seq := uint64(0)
	for _, s := range []struct {
		acct wire.Account
		cmd  uint64
	}{{a, 1}, {b, 1}, {a, 2}, {a, 3}, {b, 2}, {b, 3}, {a, 4}} {
		seq++
		if err := k.Observe(&node.Message{Seq: seq, Account: s.acct, Instance: 1, CmdSeq: s.cmd}).Err(); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
	seq++
	if k.Observe(&node.Message{Seq: seq, Account: b, Instance: 1, CmdSeq: 3}).Err() == nil {
		t.Fatal("a repeated command of the second sender passed")
	}
}

// A Stream that counts: a skipped seq and a skipped command are lost, a
// repeated seq and a repeated command dup; a stream joined late numbers a
// sender from its first command seen; FirstSeq refuses a stream that does
// not start there.
func TestStream_CountsLateJoinAndFirstSeq(t *testing.T) {
	a := wire.MustAccount("A")
	msg := func(seq, cmd uint64) *node.Message {
		return &node.Message{Seq: seq, Epoch: 1, Account: a, CmdSeq: cmd}
	}
	k := New(Config{Digest: true})
	for _, m := range []*node.Message{msg(1, 1), msg(3, 2), msg(3, 2), msg(4, 4), msg(5, 4)} {
		k.Observe(m)
	}
	if k.Lost != 2 || k.Dup != 2 || k.Received(Sender{a, 0}) != 3 || k.LastCmd(Sender{a, 0}) != 4 || k.Digest == 0 {
		t.Fatalf("lost=%d dup=%d received=%d lastcmd=%d digest=%x", k.Lost, k.Dup, k.Received(Sender{a, 0}), k.LastCmd(Sender{a, 0}), k.Digest)
	}

	late := New(Config{Late: true})
	for _, m := range []*node.Message{msg(40, 17), msg(41, 18)} {
		if v := late.Observe(m); v.Fault != OK {
			t.Fatalf("late joiner: %v", v.Err())
		}
	}
	if v := New(Config{}).Observe(msg(40, 17)); v.Fault != CmdGap || v.PrevCmd != 0 {
		t.Fatalf("joined at seq 40 without Late: %+v, want a first-command gap", v)
	}
	if v := New(Config{FirstSeq: 1, Late: true}).Observe(msg(2, 1)); v.Fault != SeqGap {
		t.Fatalf("FirstSeq 1, got seq 2: %+v", v)
	}
}

// Observe allocates nothing once the senders are known: `seqd node`
// checks every message of a throughput run.
func TestStream_ObserveAllocatesNothing(t *testing.T) {
	msg := func(seq, cmd uint64) *node.Message {
		return &node.Message{Seq: seq, Epoch: 1, Account: wire.MustAccount("A"), CmdSeq: cmd}
	}
	var s Stream
	m := msg(1, 1)
	s.Observe(m)
	if n := testing.AllocsPerRun(1000, func() {
		m.Seq++
		m.CmdSeq++
		s.Observe(m)
	}); n != 0 {
		t.Fatalf("Observe: %v allocs per message, want 0", n)
	}
}

// A hot-hot account's commands carry stream-derived ids (S<<16|k), not
// 1, 2, 3: with the account in HotHot they are neither gaps nor repeats,
// while the seqs are still checked and digested; without, they are gaps.
func TestStream_HotHotAccountsAreNotNumbered(t *testing.T) {
	pair, a := wire.MustAccount("PAIR"), wire.MustAccount("A")
	ms := []*node.Message{
		{Seq: 1, Account: a, CmdSeq: 1},
		{Seq: 2, Account: pair, Instance: 1, CmdSeq: 1 << 16},
		{Seq: 3, Account: pair, Instance: 2, CmdSeq: 2<<16 | 1},
	}
	k := New(Config{Digest: true, HotHot: []wire.Account{pair}})
	for _, m := range ms {
		if v := k.Observe(m); v.Fault != OK {
			t.Fatalf("seq %d: %v", m.Seq, v.Err())
		}
	}
	if k.Lost != 0 || k.Dup != 0 || k.Last != 3 || k.Digest == 0 {
		t.Fatalf("lost=%d dup=%d last=%d digest=%x", k.Lost, k.Dup, k.Last, k.Digest)
	}
	if v := k.Observe(&node.Message{Seq: 5, Account: pair, CmdSeq: 9}); v.Fault != SeqGap {
		t.Fatalf("a seq gap at a hot-hot command: %+v", v)
	}
	plain := New(Config{})
	for _, m := range ms {
		plain.Observe(m)
	}
	if plain.Lost == 0 {
		t.Fatal("without HotHot, stream-derived ids passed as 1, 2, 3")
	}
}
