package fault

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	c, err := Parse("loss=0.05,dup=0.01,reorder=0.02,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Loss: 0.05, Dup: 0.01, Reorder: 0.02, Seed: 7}
	if c != want {
		t.Fatalf("got %+v want %+v", c, want)
	}
	if back, err := Parse(c.String()); err != nil || back != c {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"loss", "loss=x", "lose=0.1", "loss=1", "dup=-0.1"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q) = %v, want ErrSpec", bad, err)
		}
	}
	if c, err := Parse(""); err != nil || c.Enabled() {
		t.Fatalf("empty spec: %+v %v", c, err)
	}
}

func TestInjector_RatesAndReplay(t *testing.T) {
	cfg := Config{Loss: 0.1, Dup: 0.05, Reorder: 0.05, Seed: 42}
	run := func() ([]byte, Counters) {
		in := New(cfg, 1)
		var got []byte
		out := func(b []byte) { got = append(got, b[0]) }
		for i := 0; i < 20000; i++ {
			in.Pass([]byte{byte(i)}, out)
		}
		in.Release(out)
		return got, in.Counters()
	}
	a, ca := run()
	b, cb := run()
	if string(a) != string(b) || ca != cb {
		t.Fatal("same seed gave different decisions")
	}
	if ca.Dropped < 1500 || ca.Dropped > 2500 {
		t.Errorf("dropped %d of 20000 at loss=0.1", ca.Dropped)
	}
	if ca.Duplicated == 0 || ca.Reordered == 0 {
		t.Errorf("no duplicates or reorders: %+v", ca)
	}
	if uint64(len(a)) != ca.Passed+ca.Duplicated {
		t.Errorf("delivered %d, counters %+v", len(a), ca)
	}
}

func TestInjector_PassAllocatesNothing(t *testing.T) {
	in := New(Config{Loss: 0.1, Dup: 0.1, Reorder: 0.1, Seed: 1}, 0)
	frame := make([]byte, 1472)
	n := 0
	out := func(b []byte) { n += len(b) }
	if a := testing.AllocsPerRun(1000, func() { in.Pass(frame, out) }); a != 0 {
		t.Fatalf("Pass allocates %v per frame", a)
	}
}
