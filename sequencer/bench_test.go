package sequencer

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// countingSink reads every packet (so the work is not optimised away) and
// keeps nothing.
type countingSink struct {
	packets, bytes uint64
	last           byte
}

func (s *countingSink) Publish(pkt []byte) {
	s.packets++
	s.bytes += uint64(len(pkt))
	s.last ^= pkt[len(pkt)-1]
}

func (s *countingSink) SendTo(_ transport.Peer, pkt []byte) {
	s.packets++
	s.bytes += uint64(len(pkt))
	s.last ^= pkt[len(pkt)-1]
}

// batchFrame is a reusable command frame of n commands of size bytes; next
// renumbers its commands in place for the next call.
type batchFrame struct {
	buf  []byte
	offs []int // offset of each record's cmdSeq
	seq  uint64
}

func newBatchFrame(tb testing.TB, n, size int) *batchFrame {
	tb.Helper()
	f := &batchFrame{buf: make([]byte, wire.CommandHeaderBytes+n*(wire.CommandRecordBytes+size))}
	var w wire.CommandWriter
	if err := w.Reset(f.buf, acctA, 1, 0, testSession); err != nil {
		tb.Fatal(err)
	}
	payload := make([]byte, size)
	for i := 0; i < n; i++ {
		f.offs = append(f.offs, w.Len())
		c := wire.Command{CmdSeq: uint64(i + 1), Payload: payload}
		if err := w.Append(&c); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

func (f *batchFrame) next() []byte {
	for _, o := range f.offs {
		f.seq++
		binary.LittleEndian.PutUint64(f.buf[o:], f.seq)
	}
	return f.buf
}

func BenchmarkCoreStep(b *testing.B) {
	for _, size := range []int{64, 256} {
		for _, batch := range []int{1, 8} {
			b.Run("size="+strconv.Itoa(size)+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				cfg := testConfig()
				cfg.RingBytes = 32768 * cfg.MaxPacketBytes
				sink := &countingSink{}
				c, err := NewSinkShell(cfg, sink)
				if err != nil {
					b.Fatal(err)
				}
				f := newBatchFrame(b, batch, size)
				b.ReportAllocs()
				b.SetBytes(int64(batch * size))
				start := time.Now()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := c.Step(at(int64(i)), f.next(), 1); err != nil {
						b.Fatal(err)
					}
				}
				c.Flush(at(int64(b.N)))
				elapsed := time.Since(start).Seconds()
				if got := c.Stats().Commands; got != uint64(b.N*batch) {
					b.Fatalf("sequenced %d of %d commands", got, b.N*batch)
				}
				b.ReportMetric(float64(b.N*batch)/elapsed, "cmds/s")
			})
		}
	}
}

func BenchmarkCoreNak(b *testing.B) {
	cfg := testConfig()
	cfg.RingBytes = 4096 * cfg.MaxPacketBytes
	cfg.NakAnswerBytes = 8 * cfg.MaxPacketBytes
	sink := &countingSink{}
	c, _ := NewSinkShell(cfg, sink)
	f := newBatchFrame(b, 8, 64)
	for i := 0; i < 10000; i++ {
		_ = c.Step(at(int64(i)), f.next(), 1)
	}
	c.Flush(at(0))
	nak := nakFrame(b, testSession, c.Published()-500, c.Published()-400, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Step(at(0), nak, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCore_StepAllocatesNothing(t *testing.T) {
	for _, batch := range []int{1, 8} {
		cfg := testConfig()
		sink := &countingSink{}
		c, _ := NewSinkShell(cfg, sink)
		f := newBatchFrame(t, batch, 64)
		mustStep(t, c, 0, f.next()) // a new sender allocates once
		now := int64(0)
		allocs := testing.AllocsPerRun(2000, func() {
			now++
			if err := c.Step(at(now), f.next(), 1); err != nil {
				t.Fatal(err)
			}
			if now%16 == 0 {
				c.Flush(at(now))
			}
			if now%64 == 0 {
				c.Tick(at(now + int64(time.Second)))
			}
		})
		if allocs != 0 {
			t.Fatalf("batch %d: %.1f allocations per Step", batch, allocs)
		}
		if c.Stats().Commands != uint64(2002*batch) {
			t.Fatalf("sequenced %d commands", c.Stats().Commands)
		}
	}
}

func TestCore_NakAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	cfg.RingBytes = 16 * cfg.MaxPacketBytes
	sink := &countingSink{}
	c, _ := NewSinkShell(cfg, sink)
	f := newBatchFrame(t, 2, 64)
	for i := 0; i < 100; i++ {
		mustStep(t, c, int64(i), f.next())
	}
	c.Flush(at(0))
	naks := [][]byte{
		nakFrame(t, testSession, c.Published()-5, c.Published(), 0),   // retransmit
		nakFrame(t, testSession, 1, 3, 0),                             // gone
		nakFrame(t, testSession, c.Published()+5, c.Published()+9, 0), // beyond tail
	}
	for _, nak := range naks {
		before := sink.packets
		allocs := testing.AllocsPerRun(1000, func() {
			if err := c.Step(at(0), nak, 1); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("%.1f allocations per NAK", allocs)
		}
		_ = before
	}
	if st := c.Stats(); st.Retransmitted == 0 || st.Gones == 0 || st.NaksBeyondTail == 0 {
		t.Fatalf("the NAKs did not take the paths under test: %+v", st)
	}
}
