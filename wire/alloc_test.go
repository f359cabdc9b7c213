package wire_test

import (
	"strconv"
	"testing"

	"github.com/seqd/seqd/wire"
)

// packetOf fills a packet writer with records of size bytes until it is
// full (at most limit records) and returns the frame and its record count.
func packetOf(tb testing.TB, buf []byte, size, limit int) ([]byte, int) {
	tb.Helper()
	var w wire.PacketWriter
	payload := make([]byte, size)
	if err := w.Reset(buf, wire.KindData, 1, 7, 1000, 1e9, 1); err != nil {
		tb.Fatal(err)
	}
	r := wire.Record{Time: 1e9 + 5, Account: 42, CmdSeq: 9, Payload: payload}
	for w.Count() < limit && w.Append(&r) == nil {
	}
	return w.Bytes(), w.Count()
}

func TestAllocs_Packet(t *testing.T) {
	buf := make([]byte, 1472)
	payload := make([]byte, 256)
	var w wire.PacketWriter
	var p wire.Packet
	var r wire.Record
	sum := 0
	encode := func() {
		w.Reset(buf, wire.KindData, 1, 7, 1000, 1e9, 1)
		rec := wire.Record{Time: 1e9 + 5, Account: 42, CmdSeq: 9, Payload: payload}
		for i := 0; i < 5; i++ {
			if err := w.Append(&rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	decode := func() {
		if err := wire.DecodePacket(w.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			sum += len(r.Payload)
		}
	}
	if a := testing.AllocsPerRun(1000, encode); a != 0 {
		t.Errorf("encoding a packet of 5 x 256 B allocates %v", a)
	}
	if a := testing.AllocsPerRun(1000, decode); a != 0 {
		t.Errorf("decoding a packet of 5 x 256 B allocates %v", a)
	}
	if sum != 1001*5*256 {
		t.Fatalf("decoded %d payload bytes", sum)
	}
}

func TestAllocs_CommandAndNak(t *testing.T) {
	buf := make([]byte, 1472)
	payload := make([]byte, 100)
	var w wire.CommandWriter
	var p wire.CommandPacket
	var c wire.Command
	cmd := func() {
		w.Reset(buf, 42, 1, 1, 0)
		in := wire.Command{CmdSeq: 5, Payload: payload}
		if err := w.Append(&in); err != nil {
			t.Fatal(err)
		}
		if err := wire.DecodeCommand(w.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&c) {
		}
	}
	if a := testing.AllocsPerRun(1000, cmd); a != 0 {
		t.Errorf("command encode+decode allocates %v", a)
	}
	nakBuf := make([]byte, wire.NakBytes)
	var got wire.Nak
	nak := func() {
		frame, err := wire.AppendNak(nakBuf, &wire.Nak{Epoch: 1, Session: 2, FromSeq: 3, ToSeq: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.DecodeNak(frame, &got); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(1000, nak); a != 0 {
		t.Errorf("NAK encode+decode allocates %v", a)
	}
	if got.ToSeq != 4 || c.CmdSeq != 5 {
		t.Fatalf("decoded nak %+v, command %+v", got, c)
	}
}

var benchSizes = []int{64, 256, 1400}

// BenchmarkEncodePacket fills a 1472-byte packet with records of size
// bytes; SetBytes counts payload bytes.
func BenchmarkEncodePacket(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			buf := make([]byte, wire.DefaultMaxPacketBytes)
			_, n := packetOf(b, buf, size, 1<<16)
			rec := wire.Record{Time: 1e9 + 5, Account: 42, CmdSeq: 9, Payload: make([]byte, size)}
			var w wire.PacketWriter
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			for b.Loop() {
				w.Reset(buf, wire.KindData, 1, 7, 1000, 1e9, 1)
				for i := 0; i < n; i++ {
					w.Append(&rec)
				}
			}
		})
	}
}

// BenchmarkDecodePacket decodes a full packet and visits every record.
func BenchmarkDecodePacket(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			frame, n := packetOf(b, make([]byte, wire.DefaultMaxPacketBytes), size, 1<<16)
			var p wire.Packet
			var r wire.Record
			b.SetBytes(int64(n * size))
			b.ReportAllocs()
			for b.Loop() {
				if err := wire.DecodePacket(frame, &p); err != nil {
					b.Fatal(err)
				}
				for p.Next(&r) {
				}
			}
		})
	}
}

func BenchmarkEncodeCommand(b *testing.B) {
	buf := make([]byte, wire.DefaultMaxPacketBytes)
	c := wire.Command{CmdSeq: 1, Payload: make([]byte, 256)}
	var w wire.CommandWriter
	b.SetBytes(int64(len(c.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		w.Reset(buf, 42, 1, 1, 0)
		w.Append(&c)
	}
}

func BenchmarkDecodeCommand(b *testing.B) {
	var w wire.CommandWriter
	w.Reset(make([]byte, wire.DefaultMaxPacketBytes), 42, 1, 1, 0)
	w.Append(&wire.Command{CmdSeq: 1, Payload: make([]byte, 256)})
	frame := w.Bytes()
	var p wire.CommandPacket
	var c wire.Command
	b.SetBytes(256)
	b.ReportAllocs()
	for b.Loop() {
		if err := wire.DecodeCommand(frame, &p); err != nil {
			b.Fatal(err)
		}
		for p.Next(&c) {
		}
	}
}
