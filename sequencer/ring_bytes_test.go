package sequencer

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// TestRing_KeepsBytes: packets of random sizes go in, and the ring holds
// the newest ones, byte for byte, filling RingBytes up to the padding and
// the room claimed for the next packet.
func TestRing_KeepsBytes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ringBytes, max int
	}{
		{"one chunk", 64 << 10, 1472},
		{"three chunks, loopback packets", 3*ringChunkBytes - 5, 65507},
		{"two packets", 2 * 300, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var r ring
			r.init(tc.ringBytes, tc.max)
			var all [][]byte
			seq := uint64(1)
			for i := 0; i < 3000; i++ {
				pkt := make([]byte, 68+rng.IntN(tc.max-67))
				for j := range pkt {
					pkt[j] = byte(i + j)
				}
				r.Put(pkt, PacketInfo{FirstSeq: seq, Count: 1})
				all = append(all, pkt)
				seq++
				held := int(r.next - r.first)
				if held < 1 || r.retainedBytes() > uint64(tc.ringBytes) {
					t.Fatalf("put %d: %d packets, %d bytes held, ring %d", i, held, r.retainedBytes(), tc.ringBytes)
				}
				// What is missing is at most a packet of padding per chunk,
				// the room of the next claim and one evicted packet.
				if slack := (len(r.chunks) + 2) * tc.max; held < len(all) && int(r.retainedBytes()) < tc.ringBytes-slack {
					t.Fatalf("put %d: %d bytes held, want at least %d", i, r.retainedBytes(), tc.ringBytes-slack)
				}
			}
			oldest, _ := r.Oldest()
			newest, _ := r.Newest()
			if newest.FirstSeq != seq-1 {
				t.Fatalf("newest %d, want %d", newest.FirstSeq, seq-1)
			}
			want := all[oldest.FirstSeq-1:]
			var got [][]byte
			r.Range(0, seq, func(pkt []byte, info PacketInfo) bool {
				if info.FirstSeq != oldest.FirstSeq+uint64(len(got)) {
					t.Fatalf("range gave seq %d after %d packets from %d", info.FirstSeq, len(got), oldest.FirstSeq)
				}
				got = append(got, pkt)
				return true
			})
			if len(got) != len(want) {
				t.Fatalf("range gave %d packets, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("packet seq %d differs from what was put", oldest.FirstSeq+uint64(i))
				}
			}
			// A sub-range, and an early stop.
			n := 0
			r.Range(newest.FirstSeq-2, newest.FirstSeq-1, func([]byte, PacketInfo) bool { n++; return true })
			if want := min(2, int(newest.FirstSeq-oldest.FirstSeq)); n != want {
				t.Fatalf("range of 2 seqs gave %d packets", n)
			}
			n = 0
			r.Range(0, seq, func([]byte, PacketInfo) bool { n++; return false })
			if n != 1 {
				t.Fatalf("range stopped after %d packets, want 1", n)
			}
		})
	}
}

// TestCore_RingRetainsMessagesNotSlots: with loopback-sized packets (64
// KiB) and one small message per packet, a 1 MiB ring holds thousands of
// packets, not 16 slots of MaxPacketBytes.
func TestCore_RingRetainsMessagesNotSlots(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 65507
	cfg.RingBytes = 1 << 20
	c, sink := newCore(t, cfg)
	payload := strings.Repeat("m", 256)
	for i := 1; i <= 2000; i++ {
		mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), payload)))
		c.Flush(at(int64(i)))
	}
	oldest, _ := c.ring.Oldest()
	if held := c.ring.next - c.ring.first; held < 2000 || oldest.FirstSeq > 3 {
		t.Fatalf("ring holds %d packets from seq %d, want every packet (2002 seqs, 324 B each)", held, oldest.FirstSeq)
	}
	sink.sent = nil
	mustStep(t, c, 3000, nakFrame(t, testSession, 3, 3, 0))
	if len(sink.sent) != 1 || c.Stats().Gones != 0 {
		t.Fatalf("NAK for seq 3: %d replies, %d gones; want its packet", len(sink.sent), c.Stats().Gones)
	}
}

// TestNew_RingAllocatesLazily: a sequencer with a 256 MiB ring allocates
// a chunk of it, not all of it, until packets fill it.
func TestNew_RingAllocatesLazily(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Session = testSession
	cfg.RingBytes = 256 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, _ := newCore(t, cfg)
	mustStep(t, c, 1, frame(t, acctA, 1, 0, cmd(1, "x")))
	c.Flush(at(2))
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("New and one packet allocated %d MiB, want at most 16", got>>20)
	}
	runtime.KeepAlive(c)
}

// TestCore_StepAllocatesNothingOnceWrapped: after the ring has grown to its
// size (several chunks) and wrapped, publishing allocates nothing.
func TestCore_StepAllocatesNothingOnceWrapped(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 2*ringChunkBytes + 1000
	c, _ := NewSinkShell(cfg, &countingSink{})
	f := newBatchFrame(t, 8, 64)
	now := int64(0)
	for c.ring.first == 0 {
		now++
		mustStep(t, c, now, f.next())
	}
	allocs := testing.AllocsPerRun(5000, func() {
		now++
		if err := c.Step(at(now), f.next(), 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per Step once the ring wrapped", allocs)
	}
}
