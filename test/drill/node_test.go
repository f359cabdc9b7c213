package drill

import (
	"testing"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// TestDrillNode_CountsLossRepeatsAndDigests: the drill's node counts a
// skipped seq and a skipped command as lost, a repeated seq and a
// repeated command as dup, its own commands as acked, and two streams
// that differ in one payload byte get different digests.
func TestDrillNode_CountsLossRepeatsAndDigests(t *testing.T) {
	acc, err := wire.ParseAccount("A")
	if err != nil {
		t.Fatal(err)
	}
	feed := func(msgs []node.Message) *drillNode {
		d := newDrillNode(acc, 0)
		for i := range msgs {
			d.OnMessage(&msgs[i])
		}
		return d
	}
	msg := func(seq, cmd uint64, b byte) node.Message {
		return node.Message{Seq: seq, Epoch: 1, Account: acc, CmdSeq: cmd, Payload: []byte{b}}
	}
	clean := feed([]node.Message{msg(1, 1, 0), msg(2, 2, 0), msg(3, 3, 0)})
	if k := clean.check; k.Lost != 0 || k.Dup != 0 || clean.acked() != 3 || k.Last != 3 {
		t.Fatalf("clean stream: lost=%d dup=%d acked=%d last=%d", k.Lost, k.Dup, clean.acked(), k.Last)
	}
	bad := feed([]node.Message{msg(1, 1, 0), msg(3, 2, 0), msg(3, 2, 0), msg(4, 4, 0), msg(5, 4, 0)})
	if bad.check.Lost != 2 || bad.check.Dup != 2 {
		t.Fatalf("seq 2 and command 3 skipped, seq 3 and command 4 repeated: lost=%d dup=%d, want 2 and 2", bad.check.Lost, bad.check.Dup)
	}
	other := feed([]node.Message{msg(1, 1, 0), msg(2, 2, 1), msg(3, 3, 0)})
	if other.check.Digest == clean.check.Digest {
		t.Fatal("streams that differ in a payload byte have the same digest")
	}
}
