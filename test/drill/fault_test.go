package drill

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFaults_PartitionDropsAllAndLossIsSeeded: while partitioned every
// datagram is dropped and counted; healed, none is; a seeded loss drops
// the same datagrams for the same seed and others for another seed.
func TestFaults_PartitionDropsAllAndLossIsSeeded(t *testing.T) {
	newFaults := func(seed uint64) *Faults { return &Faults{rng: rand.New(rand.NewPCG(seed, 1))} }
	f := newFaults(1)
	f.on.Store(true)
	for i := 0; i < 100; i++ {
		if !f.drop() {
			t.Fatalf("datagram %d passed a partition", i)
		}
	}
	f.on.Store(false)
	for i := 0; i < 100; i++ {
		if f.drop() {
			t.Fatalf("datagram %d dropped with no fault on", i)
		}
	}
	if f.dropped.Load() != 100 {
		t.Fatalf("dropped=%d, want 100", f.dropped.Load())
	}
	pattern := func(seed uint64) []bool {
		f := newFaults(seed)
		f.loss.Store(math.Float64bits(0.3))
		out := make([]bool, 1000)
		for i := range out {
			out[i] = f.drop()
		}
		return out
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	same, drops := true, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 dropped differently at datagram %d", i)
		}
		same = same && a[i] == c[i]
		if a[i] {
			drops++
		}
	}
	if same {
		t.Fatal("seeds 7 and 8 dropped the same datagrams")
	}
	if drops < 200 || drops > 400 {
		t.Fatalf("loss 0.3 dropped %d of 1000", drops)
	}
}
