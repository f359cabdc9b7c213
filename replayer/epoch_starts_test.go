package replayer

import "testing"

// TestEpochStarts_AfterAndBound: After names the next known epoch's
// start; an epoch at or below the newest known is ignored; past
// MaxEpochStarts the oldest are forgotten, and a full table allocates
// nothing.
func TestEpochStarts_AfterAndBound(t *testing.T) {
	var tb EpochStarts
	if _, ok := tb.After(0); ok {
		t.Fatal("an empty table knows an epoch")
	}
	tb.Add(1, 1)
	tb.Add(3, 500)
	tb.Add(2, 300) // older than the newest: ignored
	tb.Add(3, 400) // known: ignored
	for _, c := range []struct {
		e     uint32
		start uint64
		ok    bool
	}{{0, 1, true}, {1, 500, true}, {2, 500, true}, {3, 0, false}} {
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
	e := 4 + 2*uint32(MaxEpochStarts)
	if a := testing.AllocsPerRun(100, func() { tb.Add(e, uint64(e)); e++ }); a != 0 {
		t.Fatalf("%v allocations per Add to a full table, want 0", a)
	}
}
