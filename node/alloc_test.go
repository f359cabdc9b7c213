package node

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/seqd/seqd/wire"
)

type discard struct{ n int }

func (d *discard) OnMessage(m *Message) { d.n += len(m.Payload) }

type nullOut struct{ frames int }

func (o *nullOut) Send(f []byte) { o.frames++ }

// liveFeed re-stamps one encoded packet with the next seqs, so a core can be
// fed an endless in-order stream without building packets in the loop.
type liveFeed struct {
	frame []byte
	count uint64
	next  uint64
}

func newLiveFeed(t testing.TB, records, size int) *liveFeed {
	s := newStream(t)
	recs := make([]rec, records)
	for i := range recs {
		recs[i] = rec{payload: make([]byte, size), account: wire.MustAccount("other"), cmdSeq: uint64(i + 1), dt: int64(i)}
	}
	return &liveFeed{frame: s.packet(1, 1, 0, recs...), count: uint64(records), next: 1}
}

func (f *liveFeed) step(c *Core) error {
	binary.LittleEndian.PutUint64(f.frame[24:], f.next)      // firstSeq (wire v2 header)
	binary.LittleEndian.PutUint64(f.frame[40:], f.next*1000) // baseTime
	f.next += f.count
	wire.SetStable(f.frame, f.next-1)
	return c.Step(0, f.frame)
}

func newBenchCore(t testing.TB, cfg Config) (*Core, *discard) {
	d := &discard{}
	c, err := NewCore(cfg, d, &nullOut{})
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

func TestCore_StepDeliverAllocatesNothing(t *testing.T) {
	c, d := newBenchCore(t, testConfig())
	f := newLiveFeed(t, 5, 256)
	if a := testing.AllocsPerRun(1000, func() {
		if err := f.step(c); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("Step delivering 5 messages: %v allocs, want 0", a)
	}
	if d.n == 0 || c.Stats().Delivered != c.Delivered() {
		t.Fatalf("nothing delivered: %+v", c.Stats())
	}
}

func TestCore_StepBufferedSafeDeliveryAllocatesNothing(t *testing.T) {
	// Safe mode with stable lagging one packet: every record waits, held in
	// its packet by the receiver, then delivered from there.
	c, _ := newBenchCore(t, testConfig())
	f := newLiveFeed(t, 5, 256)
	step := func() {
		binary.LittleEndian.PutUint64(f.frame[24:], f.next) // firstSeq (wire v2 header)
		wire.SetStable(f.frame, f.next-1)
		f.next += f.count
		if err := c.Step(0, f.frame); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ { // warm the ring's buffers
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("buffered Step: %v allocs, want 0", a)
	}
	if c.Delivered() == 0 || c.Delivered() != f.next-1-f.count {
		t.Fatalf("Delivered() = %d, next %d", c.Delivered(), f.next)
	}
}

func TestCore_SendAndAckAllocateNothing(t *testing.T) {
	for _, arena := range []int{0, 1000} {
		t.Run(fmt.Sprintf("arena=%d", arena), func(t *testing.T) { testSendAndAckAllocateNothing(t, arena) })
	}
}

// testSendAndAckAllocateNothing with arena > 0 gives the core an arena of
// that many bytes, so that the payloads wrap around it many times.
func testSendAndAckAllocateNothing(t *testing.T, arena int) {
	cfg := testConfig()
	c, _ := newBenchCore(t, cfg)
	if arena > 0 {
		c.arena = make([]byte, arena)
	}
	s := newStream(t)
	payload := make([]byte, 256)
	me := wire.MustAccount("me")
	// The first command, acked after the incarnation record.
	if _, err := c.Send(0, payload); err != nil {
		t.Fatal(err)
	}
	c.Flush(0)
	step(t, c, 0, s.packet(1, 2, 0, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}),
		rec{payload: payload, account: me, cmdSeq: 1}))
	ack := s.packet(3, 3, 0, rec{payload: payload, account: me})
	if a := testing.AllocsPerRun(1000, func() {
		q, err := c.Send(0, payload)
		if err != nil {
			t.Fatal(err)
		}
		c.Flush(0)
		binary.LittleEndian.PutUint64(ack[24:], q+1) // firstSeq
		binary.LittleEndian.PutUint64(ack[wire.PacketHeaderBytes+16:], q)
		wire.SetStable(ack, q+1)
		if err := c.Step(0, ack); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("Send+Flush+ack: %v allocs, want 0", a)
	}
	if c.InFlight() != 0 {
		t.Fatalf("InFlight() = %d", c.InFlight())
	}
}

func TestCore_IdleTickAllocatesNothing(t *testing.T) {
	c, _ := newBenchCore(t, testConfig())
	f := newLiveFeed(t, 1, 16)
	f.step(c)
	now := int64(0)
	if a := testing.AllocsPerRun(1000, func() { now += 1000; c.Tick(now) }); a != 0 {
		t.Fatalf("idle Tick: %v allocs, want 0", a)
	}
}

func BenchmarkDeliver(b *testing.B) {
	for _, size := range []int{16, 256, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			per := max(1, (wire.DefaultMaxPacketBytes-wire.PacketHeaderBytes)/(wire.RecordHeaderBytes+size))
			c, _ := newBenchCore(b, testConfig())
			f := newLiveFeed(b, per, size)
			b.ReportAllocs()
			b.SetBytes(int64(per * size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := f.step(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*per), "ns/msg")
		})
	}
}

func BenchmarkSend(b *testing.B) {
	for _, size := range []int{16, 256, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			cfg := testConfig()
			cfg.Window = 1024
			c, _ := newBenchCore(b, cfg)
			payload := make([]byte, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Send(0, payload); err != nil {
					b.Fatal(err)
				}
				if c.InFlight() == cfg.Window {
					// Ack everything, as the stream would.
					c.ack(c.nextCmd - 1)
				}
			}
		})
	}
}
