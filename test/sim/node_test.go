package sim

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/wire"
)

// TestSim_LateJoinerAfterASenderFinished: a late joiner that starts from
// the live tail after a sender's last command saw none of it, and that
// is right; one that starts before it and saw none is still caught. (With
// the pair on, runs go on after the senders finish, and `simrun -seed 69
// -commands 2000 -with hothot` failed "n5 delivered 0 commands of n1
// (incarnation 1), which sent 666": n5 joined after n1's last one.)
func TestSim_LateJoinerAfterASenderFinished(t *testing.T) {
	a := wire.MustAccount("n1")
	for _, tc := range []struct {
		name  string
		first uint64
		ok    bool
	}{{"joined after", 4, true}, {"joined before", 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{}
			s := &simNode{w: w, name: "n1", account: a, instance: 1, incarnation: 1, cmds: 3}
			late := &simNode{w: w, name: "n5", readOnly: true, late: true, first: tc.first,
				inc: map[senderKey]uint64{}, stream: check.New(check.Config{Late: true})}
			w.nodes = []*simNode{s, late}
			for cmd := uint64(1); cmd <= 3; cmd++ {
				w.log = append(w.log, entry{account: a, instance: 1, cmdSeq: cmd, epoch: 1})
			}
			w.log = append(w.log, entry{account: wire.MustAccount("n2"), instance: 1, cmdSeq: 1, epoch: 1})
			err := late.finalCheck()
			if tc.ok && err != nil {
				t.Fatalf("late joiner from seq %d: %v", tc.first, err)
			}
			if !tc.ok && !errors.Is(err, ErrInvariant) {
				t.Fatalf("late joiner from seq %d that saw none of n1's commands passed (%v)", tc.first, err)
			}
		})
	}
}
