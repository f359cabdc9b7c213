package check

import (
	"encoding/binary"
	"testing"
)

// slowFill is the byte-at-a-time definition of a bench payload.
func slowFill(p []byte, cmd uint64) {
	for i := range p {
		p[i] = byte(cmd) + byte(i)
	}
	if len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, cmd)
	}
}

func TestBenchPayload_SameAsTheByteLoopAndChecked(t *testing.T) {
	for _, size := range []int{0, 1, 7, 8, 9, 255, 256, 257, 1400, PayloadChunk - 1, PayloadChunk, PayloadChunk + 9, 3*PayloadChunk + 300} {
		for _, cmd := range []uint64{0, 1, 200, 255, 256, 1<<40 + 77} {
			got, want := make([]byte, size), make([]byte, size)
			FillPayload(got, cmd)
			slowFill(want, cmd)
			if string(got) != string(want) {
				t.Fatalf("size %d cmd %d: fill differs from the byte loop", size, cmd)
			}
			if !PayloadOK(got, cmd) {
				t.Fatalf("size %d cmd %d: its own payload fails the check", size, cmd)
			}
			if size > 0 {
				for _, at := range []int{0, size / 2, size - 1} {
					got[at]++
					if PayloadOK(got, cmd) {
						t.Fatalf("size %d cmd %d: byte %d corrupted, check passes", size, cmd, at)
					}
					got[at]--
				}
			}
			if size >= 8 && PayloadOK(got, cmd+1) {
				t.Fatalf("size %d: payload of cmd %d passes as cmd %d", size, cmd, cmd+1)
			}
		}
	}
}

func BenchmarkBenchPayload(b *testing.B) {
	p := make([]byte, 256)
	b.SetBytes(256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		FillPayload(p, uint64(i))
		if !PayloadOK(p, uint64(i)) {
			b.Fatal("check failed")
		}
	}
}

// TestPayload_FillAndCheckAllocateNothing: `seqd node` fills and checks
// a payload per command, on its hot path.
func TestPayload_FillAndCheckAllocateNothing(t *testing.T) {
	p := make([]byte, 3*PayloadChunk+300)
	cmd := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		cmd++
		FillPayload(p, cmd)
		if !PayloadOK(p, cmd) {
			t.Fatal("check failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("FillPayload+PayloadOK: %v allocs per run, want 0", allocs)
	}
}
