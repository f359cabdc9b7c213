package bridge

import (
	"reflect"
	"testing"
)

// A newer epoch's first packet that arrives ahead of a hole of the older
// epoch waits for the hole like any packet: the records before the epoch
// start are stable records the new epoch kept, and skipping them is a
// gap. (Found by the simulator's bridge: `simrun -seed 7 -commands 2000
// -with bridge`, "bridge republished seq 455 after 445: a gap", epoch 2
// starting at 455 on the UDP channel while 446..454 were in flight on
// the TCP one.)
func TestMerge_NewerEpochAheadOfAHoleWaits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
	}{
		{"offered ahead of the hole", []step{
			{0, spec{first: 1, count: 3}, Deliver},
			{1, spec{epoch: 2, epochStart: 7, first: 7, count: 1}, Held},
			{0, spec{first: 4, count: 3}, Deliver},
			{0, spec{epoch: 2, epochStart: 7, first: 7, count: 1}, Duplicate},
		}, []string{"e1:1+3", "e1:4+3", "e2:7+1"}},
		{"held behind a second hole", []step{
			{0, spec{first: 1, count: 1}, Deliver},
			{1, spec{first: 3, count: 1}, Held},
			{1, spec{epoch: 2, epochStart: 5, first: 5, count: 1}, Held},
			{0, spec{first: 2, count: 1}, Deliver},
			{0, spec{first: 4, count: 1}, Deliver},
		}, []string{"e1:1+1", "e1:2+1", "e1:3+1", "e1:4+1", "e2:5+1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMerge(2, 1, 1<<20)
			if got := run(t, m, tc.steps); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("delivered %v, want %v", got, tc.want)
			}
			if _, hole := m.HoleSince(); hole {
				t.Fatal("a hole is left")
			}
		})
	}
}
