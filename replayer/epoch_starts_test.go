package replayer

import (
	"slices"
	"testing"
)

// TestEpochStarts_AfterAndBound: After names the next known epoch's
// start; an epoch learned after a newer one is inserted in order; past
// MaxEpochStarts the oldest are forgotten, and a full table allocates
// nothing.
func TestEpochStarts_AfterAndBound(t *testing.T) {
	var tb EpochStarts
	if _, ok := tb.After(0); ok {
		t.Fatal("an empty table knows an epoch")
	}
	tb.Add(1, 1)
	tb.Add(3, 500)
	tb.Add(2, 300) // learned late (the failover state after the stream): kept
	tb.Add(3, 500) // known: no change
	for _, c := range []struct {
		e     uint32
		start uint64
		ok    bool
	}{{0, 1, true}, {1, 300, true}, {2, 500, true}, {3, 0, false}} {
		if start, ok := tb.After(c.e); start != c.start || ok != c.ok {
			t.Errorf("After(%d) = %d, %v; want %d, %v", c.e, start, ok, c.start, c.ok)
		}
	}
	for e := uint32(4); e < 4+2*MaxEpochStarts; e++ {
		tb.Add(e, uint64(e)*1000)
	}
	if len(tb.list) != MaxEpochStarts {
		t.Fatalf("holds %d epochs, bound %d", len(tb.list), MaxEpochStarts)
	}
	// Epoch 1's successor is forgotten: the oldest known is named.
	oldest := uint32(4 + MaxEpochStarts)
	if start, ok := tb.After(1); !ok || start != uint64(oldest)*1000 {
		t.Fatalf("After(1) = %d, %v; want the oldest kept, %d", start, ok, uint64(oldest)*1000)
	}
	// Older than every kept epoch, in a full table: forgotten at once.
	if tb.Add(oldest-1, uint64(oldest-1)*1000) {
		t.Fatalf("a full table took epoch %d, older than every kept one", oldest-1)
	}
	if tb.Refused() != 0 {
		t.Fatalf("Refused = %d for starts that agree", tb.Refused())
	}
	e := 4 + 2*uint32(MaxEpochStarts)
	if a := testing.AllocsPerRun(100, func() { tb.Add(e, uint64(e)); e++ }); a != 0 {
		t.Fatalf("%v allocations per Add to a full table, want 0", a)
	}
}

// TestEpochStarts_SortedInsertRefusesContradictions: epochs learned in
// any order end up sorted; an epoch that sequenced nothing shares its
// start with the next; a second start of a known epoch, or a start that
// would make the starts decrease as epochs grow, is refused, counted,
// and leaves the table as it was.
func TestEpochStarts_SortedInsertRefusesContradictions(t *testing.T) {
	var tb EpochStarts
	for _, a := range []struct {
		epoch uint32
		start uint64
	}{{5, 900}, {2, 300}, {4, 700}, {1, 1}, {3, 700}} { // 3 sequenced nothing: 4 starts where it did
		if !tb.Add(a.epoch, a.start) {
			t.Fatalf("Add(%d, %d) refused", a.epoch, a.start)
		}
	}
	want := []Epoch{{1, 1}, {2, 300}, {3, 700}, {4, 700}, {5, 900}}
	if !slices.Equal(tb.list, want) {
		t.Fatalf("table %v, want %v", tb.list, want)
	}
	for i, a := range []struct {
		epoch uint32
		start uint64
	}{
		{2, 301}, // epoch 2 at another seq
		{6, 899}, // after epoch 5, below its start
		{0, 2},   // before epoch 1, above its start
	} {
		if tb.Add(a.epoch, a.start) {
			t.Fatalf("Add(%d, %d) taken into %v", a.epoch, a.start, want)
		}
		if got := tb.Refused(); got != uint64(i+1) {
			t.Fatalf("Refused = %d after %d contradictions", got, i+1)
		}
		if !slices.Equal(tb.list, want) {
			t.Fatalf("after the refused Add(%d, %d): table %v, want %v", a.epoch, a.start, tb.list, want)
		}
	}
	// Between two known epochs with a gap in the numbering (an epoch
	// learned late): its start must lie between theirs.
	var gap EpochStarts
	gap.Add(1, 1)
	gap.Add(4, 800)
	if gap.Add(2, 900) || !gap.Add(2, 400) || gap.Add(3, 300) || !gap.Add(3, 800) {
		t.Fatalf("inserts between epochs 1 and 4: table %v, refused %d", gap.list, gap.Refused())
	}
	if start, ok := gap.After(1); !ok || start != 400 {
		t.Fatalf("After(1) = %d, %v; want 400", start, ok)
	}
}
