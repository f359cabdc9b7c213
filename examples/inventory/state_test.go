package inventory

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func txn(t testing.TB, flags uint8, ref uint64, ups ...Update) []byte {
	t.Helper()
	p, err := AppendTxn(nil, flags, ref, ups...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestState_OversellRefusedWhole: a transaction that would take any key
// below zero is refused whole (the updates before it are undone), and a
// key may rise and fall within one transaction.
func TestState_OversellRefusedWhole(t *testing.T) {
	s := NewState(4)
	var r Reply
	s.Apply(1, 7, txn(t, 0, 1, Update{"phone", 10}, Update{"case", 1}), &r)
	if r.Outcome != OK || s.Stock("phone") != 10 || r.Stock != 10 {
		t.Fatalf("restock: %+v, phone %d", r, s.Stock("phone"))
	}
	s.Apply(2, 7, txn(t, 0, 2, Update{"phone", -3}, Update{"case", -2}), &r)
	if r.Outcome != Oversold || r.Failed != 1 || s.Stock("phone") != 10 || s.Stock("case") != 1 || r.Stock != 10 {
		t.Fatalf("oversold case: %+v, phone %d case %d (want refused whole: 10, 1)", r, s.Stock("phone"), s.Stock("case"))
	}
	s.Apply(3, 7, txn(t, 0, 3, Update{"case", 3}, Update{"case", -4}), &r)
	if r.Outcome != OK || s.Stock("case") != 0 {
		t.Fatalf("+3 then -4 on 1: %+v, case %d", r, s.Stock("case"))
	}
	s.Apply(4, 7, txn(t, 0, 4, Update{"phone", 1 << 62}, Update{"phone", 1 << 62}), &r)
	if r.Outcome != Overflow || s.Stock("phone") != 10 {
		t.Fatalf("overflow: %+v, phone %d", r, s.Stock("phone"))
	}
	s.Apply(5, 7, []byte{'T', 0, 1}, &r)
	if r.Outcome != Malformed || s.Txns() != 5 || s.Refused() != 3 {
		t.Fatalf("malformed: %+v, txns %d refused %d", r, s.Txns(), s.Refused())
	}
}

// TestState_DigestFollowsTheStream: two states fed the same stream hold
// the same digest at every seq; a different outcome changes it; a state
// restored from a batch continues with the same digests.
func TestState_DigestFollowsTheStream(t *testing.T) {
	a, b := NewState(0), NewState(0)
	var r Reply
	stream := [][]byte{
		txn(t, 0, 1, Update{"a", 5}), txn(t, 0, 2, Update{"b", 2}),
		txn(t, FlagRecord, 3, Update{"a", -4}), txn(t, FlagRecord, 4, Update{"a", -4}),
		txn(t, 0, 5, Update{"b", -1}, Update{"a", 1}),
	}
	var snap *Snapshot
	var restored *State
	for i, p := range stream {
		seq := uint64(10 + 2*i)
		a.Apply(seq, 1, p, &r)
		b.Apply(seq, 1, p, &r)
		if a.Digest() != b.Digest() {
			t.Fatalf("seq %d: digests differ", seq)
		}
		if restored != nil {
			restored.Apply(seq, 1, p, &r)
			if restored.Digest() != a.Digest() {
				t.Fatalf("seq %d: the restored state's digest differs", seq)
			}
		}
		if i == 2 {
			var bt Batch
			a.TakeBatch(&bt)
			snap = &Snapshot{Seq: bt.Seq, Digest: bt.Digest, Txns: bt.Txns, Refused: bt.Refused, Keys: bt.Keys, Stock: bt.Stock}
			restored = NewState(0)
			restored.Restore(snap)
			if d, ok := restored.DigestAt(bt.Seq); !ok || d != a.Digest() {
				t.Fatalf("restored DigestAt(%d) = %x %v, want %x", bt.Seq, d, ok, a.Digest())
			}
			if len(bt.Orders) != 1 || bt.Orders[0].Seq != 14 || bt.Orders[0].Ref != 3 {
				t.Fatalf("orders %+v, want the one success of ref 3 at seq 14", bt.Orders)
			}
		}
	}
	if d, ok := a.DigestAt(15); !ok || d == a.Digest() {
		t.Fatalf("DigestAt(15) = %x %v: want an older digest", d, ok)
	}
	c := NewState(0)
	for i, p := range stream {
		if i == 3 { // a different stream: the second reservation of 4 happens to be of 1
			p = txn(t, FlagRecord, 4, Update{"a", -1})
		}
		c.Apply(uint64(10+2*i), 1, p, &r)
	}
	if c.Digest() == a.Digest() {
		t.Fatal("different outcomes, same digest")
	}
}

// TestState_ApplyAllocatesNothing: a transaction on known keys, and the
// hand-off of its batch, allocate nothing.
func TestState_ApplyAllocatesNothing(t *testing.T) {
	s := NewState(16)
	var r Reply
	var b Batch
	s.Apply(1, 1, txn(t, 0, 1, Update{"sku-00001", 1 << 40}), &r)
	p := txn(t, FlagRecord, 2, Update{"sku-00001", -1})
	seq := uint64(2)
	for range 100 { // grow the batch's slices once
		s.Apply(seq, 1, p, &r)
		seq++
	}
	s.TakeBatch(&b)
	s.TakeBatch(&b)
	allocs := testing.AllocsPerRun(1000, func() {
		s.Apply(seq, 1, p, &r)
		seq++
		if seq%64 == 0 {
			s.TakeBatch(&b)
		}
	})
	if allocs != 0 {
		t.Fatalf("Apply allocates %v per transaction, want 0", allocs)
	}
}

// TestSQLStore_FlushAndLoad: a batch written to SQLite comes back with its
// seq and digest; a failed write (closed database) names the seq.
func TestSQLStore_FlushAndLoad(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inv.db")
	st, err := OpenStore(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	testStoreRoundTrip(t, st)
	st.Close()
	st, err = OpenStore(ctx, path) // reopen: the data is on disk
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Load(ctx)
	if err != nil || snap.Seq != 9 || len(snap.Keys) != 2 {
		t.Fatalf("reopened: %+v %v", snap, err)
	}
	st.Close()
	if err := st.Write(ctx, &Batch{Seq: 10}); !errors.Is(err, ErrStore) {
		t.Fatalf("write to a closed store: %v, want ErrStore", err)
	}
}

// testStoreRoundTrip writes two batches and checks what Load and Orders
// return (shared by the SQLite and PostgreSQL tests).
func testStoreRoundTrip(t *testing.T, st Store) {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Load(ctx)
	if err != nil || snap.Seq != 0 || len(snap.Keys) != 0 {
		t.Fatalf("empty store: %+v %v", snap, err)
	}
	s := NewState(0)
	var r Reply
	s.Apply(3, 1, txn(t, 0, 1, Update{"a", 5}, Update{"b", 7}), &r)
	s.Apply(5, 1, txn(t, FlagRecord, 2, Update{"a", -2}), &r)
	var b Batch
	s.TakeBatch(&b)
	if err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	s.Apply(9, 1, txn(t, FlagRecord, 3, Update{"b", -7}), &r)
	s.TakeBatch(&b)
	if err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	snap, err = st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Seq != 9 || snap.Digest != s.Digest() || snap.Txns != 3 || snap.Refused != 0 || len(snap.Keys) != 2 || snap.Stock[0] != 3 || snap.Stock[1] != 0 {
		t.Fatalf("loaded %+v, want seq 9, a=3 b=0, digest %x", snap, s.Digest())
	}
	orders, err := st.Orders(ctx)
	if err != nil || len(orders) != 2 || orders[0].Seq != 5 || orders[1].Ref != 3 || orders[1].Key != "b" || orders[1].Delta != -7 {
		t.Fatalf("orders %+v %v", orders, err)
	}
}

// TestCompareCheckpoints: shared seqs compared, the first difference
// named.
func TestCompareCheckpoints(t *testing.T) {
	a := []Checkpoint{{1024, 1}, {2048, 2}, {3072, 3}, {4096, 4}}
	b := []Checkpoint{{2048, 2}, {3072, 3}, {5120, 9}}
	if n, err := CompareCheckpoints(a, b); n != 2 || err != nil {
		t.Fatalf("got %d %v, want 2 in common", n, err)
	}
	b[1].Digest = 7
	if n, err := CompareCheckpoints(a, b); n != 1 || !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "seq 3072") {
		t.Fatalf("got %d %v, want a divergence at seq 3072", n, err)
	}
}
