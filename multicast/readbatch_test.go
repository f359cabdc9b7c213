package multicast

import (
	"testing"

	"golang.org/x/net/ipv4"
)

// BenchmarkReadBatchXNet keeps the measurement behind receiver's choice of
// raw recvmmsg: x/net's ReadBatch on the same socket allocates per
// datagram (it builds a *net.UDPAddr for each Message.Addr).
func BenchmarkReadBatchXNet(b *testing.B) {
	cfg := testConfig(b)
	srv, cls := session(b, cfg, 1)
	// A socket of its own on the stream group, left in the runtime's
	// poller (the client's are detached from it).
	rc, err := cfg.resolve()
	if err != nil {
		b.Fatal(err)
	}
	s, err := joinGroup(rc, rc.streamUDP)
	if err != nil {
		b.Fatal(err)
	}
	defer s.conn.Close()
	pc := s.pc
	_ = cls
	msgs := make([]ipv4.Message, cfg.BatchSize)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	frame := make([]byte, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for sent, got := 0, 0; got < b.N; {
		if sent == got {
			for range min(cfg.BatchSize, b.N-sent) {
				srv.Publish(frame)
				sent++
			}
			srv.Flush()
		}
		n, err := pc.ReadBatch(msgs, 0) // blocks until at least one arrives
		if err != nil {
			b.Fatal(err)
		}
		got += n
	}
}

// TestReceiver_ReadBatchFitsTheCache: one recvmmsg fills at most
// maxReadBatchBytes of slots (8 GRO slots of 64 KiB, not 64: 4 MiB left
// the cache before it was decoded), and at least one.
func TestReceiver_ReadBatchFitsTheCache(t *testing.T) {
	cfg := testConfig(t)
	cfg.BatchSize = 64
	_, cls := session(t, cfg, 1)
	r := cls[0].rx[0]
	if r.vlen < 1 || r.vlen*r.slot > max(maxReadBatchBytes, r.slot) || r.vlen > len(r.msgs) {
		t.Fatalf("%d slots of %d B per read (%d slots in all), want at most %d B", r.vlen, r.slot, len(r.msgs), maxReadBatchBytes)
	}
	if r.gro && r.vlen != maxReadBatchBytes/groSlotBytes {
		t.Fatalf("%d GRO slots per read, want %d", r.vlen, maxReadBatchBytes/groSlotBytes)
	}
}
