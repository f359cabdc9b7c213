package tcp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// TestServer_PublishedOnceInterleavedWithSendTo: frames published are
// kept once for all connections and frames sent to one connection are
// kept for it alone; each client gets its own frames in the order the
// server queued them, among the published ones, across several flushes
// (some of them large enough that the socket does not take everything at
// once and the writer takes the rest).
func TestServer_PublishedOnceInterleavedWithSendTo(t *testing.T) {
	cfg, _ := testConfig(t)
	// The clients read only once everything is queued: no slow-client cut.
	cfg.MaxQueueBytes = 256 << 20
	cfg.SlowClientTimeout = time.Minute
	s := newServer(t, cfg)
	clients := []*Client{dial(t, cfg, s), dial(t, cfg, s), dial(t, cfg, s)}
	waitClients(t, s, len(clients))
	peers := s.Peers(nil)
	if len(peers) != 3 {
		t.Fatalf("Peers() = %v", peers)
	}
	want := make(map[transport.Peer][][]byte)
	n := 0
	for round := range 20 {
		for i := range 50 + round*60 {
			f := numbered(n, 16+(n*131)%3000)
			n++
			if i%7 == 3 {
				to := peers[(i/7)%len(peers)]
				if err := s.SendTo(to, f); err != nil {
					t.Fatal(err)
				}
				want[to] = append(want[to], f)
				continue
			}
			if err := s.Publish(f); err != nil {
				t.Fatal(err)
			}
			for _, p := range peers {
				want[p] = append(want[p], f)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Which client is which peer: each got a different first SendTo.
	got := make([]recorder, len(clients))
	for i, c := range clients {
		eventually(t, fmt.Sprintf("client %d", i), c, got[i].handle, func() bool {
			for _, w := range want {
				if len(got[i].frames) == len(w) {
					return true
				}
			}
			return false
		})
	}
	matched := 0
	for i := range clients {
		for _, p := range peers {
			w := want[p]
			if len(w) != len(got[i].frames) {
				continue
			}
			ok := true
			for j := range w {
				if !bytes.Equal(w[j], got[i].frames[j]) {
					ok = false
					break
				}
			}
			if ok {
				matched++
				break
			}
		}
	}
	if matched != len(clients) {
		t.Fatalf("%d of %d clients got exactly their frames in order", matched, len(clients))
	}
}

// TestServer_ClientJoiningMidBatchGetsTheNextPublish: a connection the
// server picks up between two Publishes of one batch gets the frames from
// the next Publish on, never a part of the batch before it.
func TestServer_ClientJoiningMidBatchGetsTheNextPublish(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	first := dial(t, cfg, s)
	waitClients(t, s, 1)
	if err := s.Publish(numbered(0, 100)); err != nil {
		t.Fatal(err)
	}
	second := dial(t, cfg, s)
	deadline := time.Now().Add(liveness)
	for s.Clients() < 2 { // no Poll: that would flush the batch
		if time.Now().After(deadline) {
			t.Fatal("second client not accepted")
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Publish(numbered(1, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var a, b recorder
	eventually(t, "first", first, a.handle, func() bool { return len(a.frames) == 2 })
	eventually(t, "second", second, b.handle, func() bool { return len(b.frames) == 1 })
	if !bytes.Equal(b.frames[0], numbered(1, 100)) {
		t.Fatalf("second client got %x..., want frame 1", b.frames[0][:4])
	}
}

// BenchmarkPublishFlush measures one frame from Publish on the server to
// the handlers of all its clients over loopback, flushed in batches of
// 64: the server's cost grows with the clients it copies to and writes.
func BenchmarkPublishFlush(b *testing.B) {
	for _, clients := range []int{1, 3} {
		b.Run(fmt.Sprintf("clients=%d/size=256", clients), func(b *testing.B) {
			cfg := benchConfig()
			s := newServer(b, cfg)
			cs := make([]*Client, clients)
			got := make([]counter, clients)
			hs := make([]transport.Handler, clients)
			for i := range cs {
				cs[i] = dial(b, cfg, s)
				hs[i] = got[i].handle
			}
			waitClients(b, s, clients)
			frame := make([]byte, 256)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				for end := min(sent+64, b.N); sent < end; sent++ {
					s.Publish(frame)
				}
				s.Flush()
				for i, c := range cs {
					receive(b, c, hs[i], &got[i], sent)
				}
			}
		})
	}
}
