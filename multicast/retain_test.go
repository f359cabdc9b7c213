package multicast

import (
	"testing"
)

// TestPublishRetained_FramesArriveIntact: frames published by reference
// from one buffer, back to back (runs of equal sizes that GSO sends as one
// message) and with gaps between them (which must not be joined), reach
// every client whole and in order; the queue never holds more retained
// bytes than it announces, flushing on its own; after a Flush the buffer
// is the caller's again.
func TestPublishRetained_FramesArriveIntact(t *testing.T) {
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 2)
	ring := make([]byte, 4*srv.MaxRetainedBytes())
	for round := range 3 {
		var sizes []int
		pos := 0
		for i := 0; pos < len(ring)-2*maxDatagramBytes; i++ {
			n := 1000
			switch {
			case i%17 == 16:
				n = 500 // a short one ends a GSO run
			case i%29 == 28:
				pos += 8 // a gap: the next frame does not follow
			case i%41 == 40:
				n = 9000
			}
			indexed(ring[pos:pos+n], uint64(len(sizes)))
			if err := srv.PublishRetained(ring[pos : pos+n]); err != nil {
				t.Fatal(err)
			}
			if srv.out.retained > srv.MaxRetainedBytes() {
				t.Fatalf("round %d: %d retained bytes queued, at most %d announced", round, srv.out.retained, srv.MaxRetainedBytes())
			}
			sizes = append(sizes, n)
			pos += n
		}
		receiveSizes(t, srv, cls, sizes)
		clear(ring) // the caller's again
	}
	if srv.out.gso && srv.out.gsoMessages == 0 {
		t.Error("no GSO message: the runs of frames back to back were not joined")
	}
}

func TestPublishRetainedFlush_AllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 1)
	buf := make([]byte, 256*cfg.BatchSize)
	var got counter
	h := got.handle
	want := 0
	a := testing.AllocsPerRun(200, func() {
		for i := range cfg.BatchSize {
			if err := srv.PublishRetained(buf[i*256 : (i+1)*256]); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.Flush(); err != nil {
			t.Fatal(err)
		}
		want += cfg.BatchSize
		if !pollN(cls[0], h, &got, want) {
			t.Fatalf("%d of %d frames arrived", got.frames, want)
		}
	})
	if a != 0 {
		t.Fatalf("PublishRetained+Flush+Poll: %v allocs, want 0", a)
	}
}
