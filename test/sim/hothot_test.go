package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/seqd/seqd/wire"
)

// pairLog builds the start of a stream for the pair checker: instance 1
// activated at seq 1, an order at seq 2.
func pairLog() []entry {
	act := entry{flags: wire.FlagInternal, epoch: 1}
	act.internal.Type, act.internal.Account, act.internal.Instance = wire.InternalNodeActivated, pairAccount, 1
	return []entry{act, {account: wire.MustAccount("a"), instance: 1, cmdSeq: 1, epoch: 1}}
}

func pairAnswer(order uint64, epoch uint32) entry {
	return entry{account: pairAccount, instance: 1, cmdSeq: order << 16, epoch: epoch}
}

// TestSimPair_CutAnswerSequencedAgain: an epoch change cuts the pair's
// answer to an order (seq 3, not yet stable), the new primary publishes
// in the same step (its epoch start at seq 3, the log back at the checked
// length) and later sequences the instance's resent answer once, at seq
// 4. That is the answer's only copy in the stream; the checker must not
// count the cut one. (Before the fix it did: `simrun -with hothot -seed 9
// -commands 2000` failed "seq 653: order 579 answered twice", the first
// answer being seq 599 of epoch 2, cut at 598 by the epoch-3 primary.)
func TestSimPair_CutAnswerSequencedAgain(t *testing.T) {
	w := &world{}
	p := &simPair{w: w, active: -1, answered: map[uint64]bool{}}
	w.log = append(pairLog(), pairAnswer(2, 1))
	p.check()
	if w.err != nil {
		t.Fatalf("before the cut: %v", w.err)
	}
	// The epoch change: seq 3 cut, and the new primary's first record.
	w.cuts = append(w.cuts, epochCut{epoch: 1, last: 2, lost: w.log[2:]})
	hb := entry{flags: wire.FlagInternal, epoch: 2}
	hb.internal.Type = wire.InternalEpochStart
	w.log = append(w.log[:2], hb)
	p.check()
	w.log = append(w.log, pairAnswer(2, 2))
	p.check()
	if w.err != nil {
		t.Fatalf("the resent answer after the cut: %v", w.err)
	}
	if !p.answered[2] {
		t.Fatal("order 2 not answered after the resent answer")
	}
}

// TestSimPair_AnswerTwiceFails: the checker still catches an answer
// sequenced twice in one epoch, and one from a passive instance.
func TestSimPair_AnswerTwiceFails(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		tail       []entry
	}{
		{"twice", "order 2 answered twice", []entry{pairAnswer(2, 1), pairAnswer(2, 1)}},
		{"passive", "while the active instance is 1", []entry{{account: pairAccount, instance: 2, cmdSeq: 2 << 16, epoch: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{}
			p := &simPair{w: w, active: -1, answered: map[uint64]bool{}}
			w.log = append(pairLog(), tc.tail...)
			p.check()
			if !errors.Is(w.err, ErrInvariant) || !strings.Contains(w.err.Error(), tc.want) {
				t.Fatalf("checker said %v, want an invariant violation with %q", w.err, tc.want)
			}
		})
	}
}
