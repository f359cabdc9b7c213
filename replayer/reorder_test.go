package replayer

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/seqd/seqd/wire"
)

// drainAll takes every frame out of r, earliest first.
func drainAll(r *Reorder) []Held {
	var out []Held
	for r.Len() > 0 {
		h := r.First()
		h.Frame = append([]byte(nil), h.Frame...)
		out = append(out, h)
		r.Drop()
	}
	return out
}

// TestReorder_ReleasesInStreamOrder: packets put in any order (fragments
// of one message among them, some twice) come out once each, in stream
// order, byte for byte; Bytes counts what is held.
func TestReorder_ReleasesInStreamOrder(t *testing.T) {
	pkts := mixed(600).pkts
	var r Reorder
	r.Init(64 << 20)
	order := rand.New(rand.NewSource(1)).Perm(len(pkts))
	total := 0
	for _, i := range order {
		if same, err := r.Put(pkts[i]); same || err != nil {
			t.Fatalf("Put(packet %d) = %v, %v; want a new frame", i, same, err)
		}
		total += len(pkts[i])
	}
	for _, i := range order[:20] {
		if same, err := r.Put(pkts[i]); !same || err != nil {
			t.Fatalf("Put(packet %d) again = %v, %v; want a duplicate dropped", i, same, err)
		}
	}
	if r.Len() != len(pkts) || r.Bytes() != total {
		t.Fatalf("holds %d frames, %d bytes; want %d, %d", r.Len(), r.Bytes(), len(pkts), total)
	}
	got := drainAll(&r)
	if len(got) != len(pkts) {
		t.Fatalf("released %d frames, want %d", len(got), len(pkts))
	}
	for i, h := range got {
		info := packetInfo(pkts[i])
		if !bytes.Equal(h.Frame, pkts[i]) || h.FirstSeq != info.FirstSeq || h.LastSeq != info.LastSeq() || h.Epoch != packetEpoch(pkts[i]) {
			t.Fatalf("frame %d: %+v, want packet %d (first %d last %d)", i, h, i, info.FirstSeq, info.LastSeq())
		}
		if info.Fragment && h.Offset != info.FragFrom {
			t.Fatalf("frame %d: offset %d, want %d", i, h.Offset, info.FragFrom)
		}
	}
	if r.Bytes() != 0 {
		t.Fatalf("empty Reorder counts %d bytes", r.Bytes())
	}
}

// TestReorder_NewestEpochWinsItsPlace: at one stream position a newer
// epoch's packet replaces an older one's (whichever came first), and an
// older one's is dropped.
func TestReorder_NewestEpochWinsItsPlace(t *testing.T) {
	st := newStream()
	for i := 0; i < 30; i++ {
		st.msg(100)
	}
	st.flush()
	old := st.pkts[1]
	st.restartEpoch(packetInfo(old).FirstSeq)
	for i := 0; i < 20; i++ {
		st.msg(100)
	}
	st.flush()
	var repl []byte
	for _, p := range st.pkts {
		if packetEpoch(p) == 2 {
			repl = p
			break
		}
	}
	if repl == nil || packetInfo(repl).FirstSeq != packetInfo(old).FirstSeq {
		t.Fatal("the test needs two epochs' packets at one seq")
	}
	for _, order := range [][2][]byte{{old, repl}, {repl, old}} {
		var r Reorder
		r.Init(1 << 20)
		if _, err := r.Put(order[0]); err != nil {
			t.Fatal(err)
		}
		same, err := r.Put(order[1])
		if !same || err != nil {
			t.Fatalf("second Put at one place = %v, %v; want same", same, err)
		}
		if r.Len() != 1 || r.Bytes() != len(repl) || !bytes.Equal(r.First().Frame, repl) || r.First().Epoch != 2 {
			t.Fatalf("holds %d frames (%d bytes), first of epoch %d; want epoch 2's packet alone", r.Len(), r.Bytes(), r.First().Epoch)
		}
	}
}

// TestReorder_Bounded: a frame that would take the bytes held past the
// bound is refused with ErrPendingFull and nothing held changes; after a
// Drop there is room again.
func TestReorder_Bounded(t *testing.T) {
	pkts := mixed(400).pkts
	var r Reorder
	r.Init(8 << 10)
	var err error
	n := 0
	for _, p := range pkts[1:] {
		if _, err = r.Put(p); err != nil {
			break
		}
		n++
	}
	if !errors.Is(err, ErrPendingFull) {
		t.Fatalf("Put past the bound: %v, want ErrPendingFull", err)
	}
	if r.Len() != n || r.Bytes() > 8<<10 {
		t.Fatalf("holds %d frames, %d bytes; want %d frames within %d bytes", r.Len(), r.Bytes(), n, 8<<10)
	}
	r.Drop()
	r.Drop()
	if _, err := r.Put(pkts[n+1]); err != nil {
		t.Fatalf("Put after two drops: %v", err)
	}
	if _, err := r.Put(pkts[0][:wire.PacketHeaderBytes-1]); !errors.Is(err, wire.ErrShort) {
		t.Fatalf("Put of a short frame: %v, want wire.ErrShort", err)
	}
}

// TestReorder_FreeBuffersBounded: the buffers kept for reuse after a
// drain stay within the bound, however many frames were held.
func TestReorder_FreeBuffersBounded(t *testing.T) {
	pkts := mixed(3000).pkts
	var r Reorder
	r.Init(32 << 10)
	for i := 0; i < len(pkts); {
		for ; i < len(pkts); i++ {
			if _, err := r.Put(pkts[i]); errors.Is(err, ErrPendingFull) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		drainAll(&r)
		if r.freeBytes > 32<<10 {
			t.Fatalf("%d bytes of free buffers kept, bound %d", r.freeBytes, 32<<10)
		}
	}
}

// putBehindGap puts five packets from pkts[i] into r, the first last (it
// fills the gap), and drops them all, earliest first; it returns the
// index of the next five (from 0 again at the end).
func putBehindGap(tb testing.TB, r *Reorder, pkts [][]byte, i int) int {
	if i+5 > len(pkts) {
		i = 0
	}
	for k := 4; k >= 0; k-- {
		if _, err := r.Put(pkts[i+k]); err != nil {
			tb.Fatal(err)
		}
	}
	for r.Len() > 0 {
		r.Drop()
	}
	return i + 5
}

// TestReorder_AllocatesNothing: once warm, holding packets behind a gap
// and releasing them allocates nothing per packet.
func TestReorder_AllocatesNothing(t *testing.T) {
	pkts := mixed(20000).pkts
	var r Reorder
	r.Init(1 << 20)
	i := 0
	for range 20 {
		i = putBehindGap(t, &r, pkts, i)
	}
	if a := testing.AllocsPerRun(500, func() { i = putBehindGap(t, &r, pkts, i) }); a != 0 {
		t.Fatalf("%v allocations per round of 5 packets, want 0", a)
	}
}

// BenchmarkReorder_PutDrop: five packets held behind a gap, then
// released.
func BenchmarkReorder_PutDrop(b *testing.B) {
	pkts := mixed(20000).pkts
	var r Reorder
	r.Init(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for range b.N {
		i = putBehindGap(b, &r, pkts, i)
	}
}
