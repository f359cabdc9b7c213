package tiered

import (
	"testing"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// TestUpstream_PollAllocatesNothing: handing a chunk of frames to the
// follow handler allocates nothing per packet or per chunk.
func TestUpstream_PollAllocatesNothing(t *testing.T) {
	u, err := NewUpstream(UpstreamConfig{Addrs: []string{"127.0.0.1:1"}, FailoverWait: 1, RetryMax: 1, DialTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, wire.DefaultMaxPacketBytes)
	var w wire.PacketWriter
	if err := w.Reset(buf, wire.KindData, 1, 9, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Record{Payload: []byte("hello"), Time: 1}); err != nil {
		t.Fatal(err)
	}
	var frames []byte
	for i := 0; i < 10; i++ {
		frames = wire.AppendRewindFrame(frames, w.Bytes())
	}
	got := 0
	h := func(pkt []byte, _ transport.Peer) { got += len(pkt) }
	allocs := testing.AllocsPerRun(100, func() {
		b := <-u.free
		n := copy(b, frames)
		u.full <- upstreamChunk{b: b, n: n}
		if k, err := u.Poll(h, 0); err != nil || k != 10 {
			t.Fatalf("Poll = %d, %v; want 10 packets", k, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Poll allocates %v per chunk", allocs)
	}
	if got == 0 {
		t.Fatal("handler saw nothing")
	}
}
