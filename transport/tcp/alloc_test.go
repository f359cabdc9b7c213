package tcp

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

type counter struct{ frames, bytes int }

func (c *counter) handle(frame []byte, _ transport.Peer) {
	c.frames++
	c.bytes += len(frame)
}

// receive polls p until n frames arrived in total; it is the receive half
// of the allocation tests and benchmarks.
func receive(tb testing.TB, p transport.Client, h transport.Handler, got *counter, n int) {
	deadline := time.Now().Add(liveness)
	for got.frames < n {
		if _, err := p.Poll(h, 10*time.Millisecond); err != nil {
			tb.Fatal(err)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d frames arrived", got.frames, n)
		}
	}
}

const batch = 16

// flood is one round of the allocation tests: batch frames queued by
// send and flushed, then p polled until all of them are in got.
func flood(t *testing.T, frame []byte, send func([]byte) error, flush func() error, p transport.Client, got *counter) func() {
	h := got.handle
	want := 0
	return func() {
		for range batch {
			if err := send(frame); err != nil {
				t.Fatal(err)
			}
		}
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		want += batch
		receive(t, p, h, got, want)
	}
}

func TestServer_PublishFlushPollAllocatesNothing(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	frame := make([]byte, 256)
	var got counter
	cycle := flood(t, frame, s.Publish, s.Flush, c, &got)
	for range 10 {
		cycle() // buffers reach their steady size
	}
	if a := testing.AllocsPerRun(200, cycle); a != 0 {
		t.Fatalf("Publish+Flush+Poll of %d frames allocates %v", batch, a)
	}
	if got.bytes != got.frames*len(frame) {
		t.Fatalf("received %d bytes in %d frames", got.bytes, got.frames)
	}
}

func TestClient_SendFlushPollAllocatesNothing(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	frame := make([]byte, 256)
	var got counter
	cycle := flood(t, frame, c.Send, c.Flush, serverPoller{s}, &got)
	for range 10 {
		cycle()
	}
	if a := testing.AllocsPerRun(200, cycle); a != 0 {
		t.Fatalf("Send+Flush+Poll of %d frames allocates %v", batch, a)
	}
}

// serverPoller lets receive poll a server.
type serverPoller struct{ *Server }

func (serverPoller) Send([]byte) error { return nil }

// Faults run in Poll without allocating.
func TestServer_PollWithFaultsAllocatesNothing(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Faults.Dup, cfg.Faults.Reorder, cfg.Faults.Seed = 0.1, 0.1, 3
	s := newServer(t, cfg)
	cfg.Faults = DefaultConfig().Faults
	c := dial(t, cfg, s)
	frame := make([]byte, 256)
	var got counter
	// Duplicates only add frames: receive waits for at least the sent.
	cycle := flood(t, frame, c.Send, c.Flush, serverPoller{s}, &got)
	for range 10 {
		cycle()
	}
	if a := testing.AllocsPerRun(200, cycle); a != 0 {
		t.Fatalf("Poll with faults allocates %v per %d frames", a, batch)
	}
}

// BenchmarkPublishPoll measures one frame from Publish on the server to
// the client's handler over loopback, flushed in batches of 64.
func BenchmarkPublishPoll(b *testing.B) {
	for _, size := range []int{64, 256, 1472, 4096, 8192, 16384} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			cfg := benchConfig()
			s := newServer(b, cfg)
			c := dial(b, cfg, s)
			waitClients(b, s, 1)
			frame := make([]byte, size)
			var got counter
			h := got.handle
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				for end := min(sent+64, b.N); sent < end; sent++ {
					s.Publish(frame)
				}
				s.Flush()
				receive(b, c, h, &got, sent)
			}
		})
	}
}

// BenchmarkSendPoll measures one command from a client's Send to the
// server's handler, flushed in batches of 64.
func BenchmarkSendPoll(b *testing.B) {
	cfg := benchConfig()
	s := newServer(b, cfg)
	c := dial(b, cfg, s)
	frame := make([]byte, 256)
	var got counter
	h := got.handle
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		for end := min(sent+64, b.N); sent < end; sent++ {
			c.Send(frame)
		}
		c.Flush()
		receive(b, serverPoller{s}, h, &got, sent)
	}
}
