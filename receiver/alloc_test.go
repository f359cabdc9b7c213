package receiver

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// feed re-stamps one encoded packet with the next seqs, so a receiver can
// be fed an endless stream without building packets in the loop.
type feed struct {
	frame []byte
	count uint64
	next  uint64
}

func newFeed(t testing.TB, records, size int) *feed {
	s := newStream(t)
	recs := make([]rec, records)
	for i := range recs {
		recs[i] = rec{payload: make([]byte, size), account: wire.MustAccount("other"), cmdSeq: uint64(i + 1)}
	}
	return &feed{frame: s.packet(1, 1, 0, recs...), count: uint64(records), next: 1}
}

// stamp sets the packet's first seq and stable, and moves on.
func (f *feed) stamp(stable uint64) {
	binary.LittleEndian.PutUint64(f.frame[24:], f.next)
	wire.SetStable(f.frame, stable)
	f.next += f.count
}

func consume(r *Receiver) int {
	n := 0
	for _, m := range r.Ready().Deliver {
		n += len(m.Payload)
	}
	r.Advance()
	return n
}

func TestReceiver_InOrderDeliveryAllocatesNothing(t *testing.T) {
	r := newTest(t, testConfig())
	f := newFeed(t, 5, 256)
	got := 0
	if a := testing.AllocsPerRun(1000, func() {
		f.stamp(f.next + f.count - 1)
		if err := r.Step(0, f.frame, Sequencer); err != nil {
			t.Fatal(err)
		}
		got += consume(r)
	}); a != 0 {
		t.Fatalf("in-order Step: %v allocs, want 0", a)
	}
	if got == 0 || r.Next() != f.next {
		t.Fatalf("delivered %d bytes, next %d want %d", got, r.Next(), f.next)
	}
}

func TestReceiver_BufferedDeliveryAllocatesNothing(t *testing.T) {
	// Safe mode with stable one packet behind: every record waits, held
	// in its packet (hold.go) or, with HoldBytes 0, copied into the ring,
	// then delivered from there.
	for _, hold := range []int{DefaultConfig().HoldBytes, 0} {
		t.Run("hold="+itoa(hold), func(t *testing.T) {
			cfg := testConfig()
			cfg.HoldBytes = hold
			r := newTest(t, cfg)
			f := newFeed(t, 5, 256)
			step := func() {
				f.stamp(f.next - 1)
				if err := r.Step(0, f.frame, Sequencer); err != nil {
					t.Fatal(err)
				}
				consume(r)
			}
			for i := 0; i < 1000; i++ {
				step()
			}
			if a := testing.AllocsPerRun(1000, step); a != 0 {
				t.Fatalf("buffered Step: %v allocs, want 0", a)
			}
			if r.Next() != f.next-f.count {
				t.Fatalf("next %d, want %d", r.Next(), f.next-f.count)
			}
			if held := r.Stats().HeldPackets; (held > 0) != (hold > 0) {
				t.Fatalf("%d packets held with HoldBytes %d", held, hold)
			}
		})
	}
}

func TestReceiver_NakAndStatusAllocateNothing(t *testing.T) {
	cfg := testConfig()
	cfg.StatusInterval = time.Millisecond
	r := newTest(t, cfg)
	s := newStream(t)
	if err := r.Step(0, s.msgs(1, 1), Sequencer); err != nil {
		t.Fatal(err)
	}
	consume(r)
	hb := s.heartbeat(10, 9, 0) // 2..9 missing, never repaired
	now := int64(0)
	naks := uint64(0)
	if a := testing.AllocsPerRun(1000, func() {
		now += int64(cfg.NakMaxDelay)
		if err := r.Step(now, hb, Sequencer); err != nil {
			t.Fatal(err)
		}
		r.Tick(now)
		consume(r)
	}); a != 0 {
		t.Fatalf("NAK + status: %v allocs, want 0", a)
	}
	naks = r.Stats().NaksSent
	if naks < 1000 || r.Stats().StatusSent == 0 {
		t.Fatalf("stats %+v", r.Stats())
	}
}

func BenchmarkReceiverDeliver(b *testing.B) {
	for _, size := range []int{16, 256} {
		b.Run("size="+itoa(size), func(b *testing.B) {
			per := max(1, (wire.DefaultMaxPacketBytes-wire.PacketHeaderBytes)/(wire.RecordHeaderBytes+size))
			r := newTest(b, testConfig())
			f := newFeed(b, per, size)
			b.ReportAllocs()
			b.SetBytes(int64(per * size))
			for b.Loop() {
				f.stamp(f.next + f.count - 1)
				if err := r.Step(0, f.frame, Sequencer); err != nil {
					b.Fatal(err)
				}
				consume(r)
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkReceiverDeliverSafeLag is safe delivery behind a sequencer
// group: each packet's stable lags by lag records (the standbys' round
// trip: about 12k in seqd bench --sequencers 3), so every record waits;
// held in its packet (hold.go) or, with hold=0, copied into the ring.
// Packets of the default size and of 64 KiB (GSO); per packet, 256-byte
// records.
func BenchmarkReceiverDeliverSafeLag(b *testing.B) {
	for _, pkt := range []int{wire.DefaultMaxPacketBytes, 65507} {
		for _, lagRecords := range []int{2000, 12000} {
			for _, hold := range []int{DefaultConfig().HoldBytes, 0} {
				b.Run("packet="+itoa(pkt)+"/lag="+itoa(lagRecords)+"/hold="+itoa(hold), func(b *testing.B) {
					const size = 256
					per := max(1, (pkt-wire.PacketHeaderBytes)/(wire.RecordHeaderBytes+size))
					lag := max(1, lagRecords/per)
					cfg := testConfig()
					cfg.PendingRecords = DefaultConfig().PendingRecords
					cfg.HoldBytes = hold
					r := newTest(b, cfg)
					f := newFeed(b, per, size)
					step := func() {
						f.stamp(max(f.next+f.count-1, uint64(lag*per)) - uint64(lag*per))
						if err := r.Step(0, f.frame, Sequencer); err != nil {
							b.Fatal(err)
						}
						consume(r)
					}
					for range 2 * lag {
						step()
					}
					b.ReportAllocs()
					b.SetBytes(int64(per * size))
					for b.Loop() {
						step()
					}
					if want := f.next - uint64(lag*per); r.Next() != want {
						b.Fatalf("next %d, want %d (%+v)", r.Next(), want, r.Stats())
					}
					if held := r.Stats().HeldPackets; (held > 0) != (hold > 0) {
						b.Fatalf("%d packets held with HoldBytes %d", held, hold)
					}
				})
			}
		}
	}
}
