package multicast

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
)

func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items at random); run go test without -race")
	}
}

// counter is a handler that only counts, built once.
type counter struct{ frames, bytes int }

func (c *counter) handle(frame []byte, _ transport.Peer) { c.frames++; c.bytes += len(frame) }

// pollN polls until c has seen want frames; false if the transport stalls.
func pollN(p interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, h transport.Handler, c *counter, want int) bool {
	for tries := 0; c.frames < want; tries++ {
		if tries > 1000 {
			return false
		}
		if _, err := p.Poll(h, 10*time.Millisecond); err != nil {
			return false
		}
	}
	return true
}

func TestPublishFlush_AllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 1)
	frame := make([]byte, 256)
	batch := cfg.BatchSize
	a := testing.AllocsPerRun(200, func() {
		for range batch {
			if err := srv.Publish(frame); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := cls[0].Send(frame); err != nil {
			t.Fatal(err)
		}
		if err := cls[0].Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if a != 0 {
		t.Fatalf("Publish x%d + Flush + Send + Flush allocates %v", batch, a)
	}
	if c := srv.Counters(); c.FramesSent != uint64(201*batch) {
		t.Fatalf("server sent %d frames, want %d", c.FramesSent, 201*batch)
	}
	if srv.out.gsoMessages < 201 {
		t.Fatalf("%d GSO messages in 201 flushes of %d equal frames: the GSO path did not run", srv.out.gsoMessages, batch)
	}
}

func TestPoll_AllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	for _, faulty := range []bool{false, true} {
		t.Run(fmt.Sprintf("faults=%v", faulty), func(t *testing.T) {
			cfg := testConfig(t)
			if faulty {
				// Dup and reorder only: every frame still arrives, so the
				// loop below knows how many to wait for.
				cfg.Faults = fault.Config{Dup: 0.01, Reorder: 0.01, Seed: 1}
			}
			srv, cls := session(t, cfg, 1)
			cl := cls[0]
			frame := make([]byte, 256)
			var atClient, atServer counter
			hc, hs := atClient.handle, atServer.handle
			const batch = 64
			ok := true
			round := func() {
				for range batch {
					srv.Publish(frame)
					cl.Send(frame)
				}
				srv.Flush()
				cl.Flush()
				want := atClient.frames + batch
				ok = ok && pollN(cl, hc, &atClient, want)
				ok = ok && pollN(srv, hs, &atServer, atServer.frames+batch)
			}
			round() // the server learns the client's address (one allocation)
			if a := testing.AllocsPerRun(200, round); a != 0 {
				t.Fatalf("Publish/Send x%d + Poll on both ends allocates %v per round", batch, a)
			}
			if !ok {
				t.Fatalf("transport stalled: client %d frames, server %d", atClient.frames, atServer.frames)
			}
			if atServer.frames < 201*batch || atClient.frames < 201*batch {
				t.Fatalf("client got %d, server %d; want >= %d each", atClient.frames, atServer.frames, 201*batch)
			}
			if cl.rx[0].groBuffers == 0 {
				t.Fatalf("no GRO buffer received: the GRO path did not run (%s)", cl.SocketInfo())
			}
		})
	}
}

func TestPeerTable_LookupAllocatesNothing(t *testing.T) {
	pt := newPeerTable(0)
	ap := netip.MustParseAddrPort("10.0.0.1:4000")
	p := pt.lookup(ap)
	if a := testing.AllocsPerRun(1000, func() {
		if pt.lookup(ap) != p {
			t.Fatal("lookup changed")
		}
	}); a != 0 {
		t.Fatalf("lookup of a known peer allocates %v", a)
	}
}

// BenchmarkPublishPoll measures one server publishing to one client over
// loopback: frames per second through sendmmsg, the kernel and recvmmsg.
func BenchmarkPublishPoll(b *testing.B) {
	for _, size := range []int{256, 1400} {
		for _, offload := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/gso,gro=%v", size, offload), func(b *testing.B) {
				benchPublishPoll(b, size, offload)
			})
		}
	}
}

// benchPublishPoll: with offload, each flush of BatchSize equal frames is
// one GSO message and arrives as one GRO buffer.
func benchPublishPoll(b *testing.B, size int, offload bool) {
	cfg := testConfig(b)
	cfg.GSO, cfg.GRO = offload, offload
	srv, cls := session(b, cfg, 1)
	frame := make([]byte, size)
	var c counter
	h := c.handle
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		k := min(cfg.BatchSize, b.N-sent)
		for range k {
			if err := srv.Publish(frame); err != nil {
				b.Fatal(err)
			}
		}
		if err := srv.Flush(); err != nil {
			b.Fatal(err)
		}
		sent += k
		if !pollN(cls[0], h, &c, sent) {
			b.Fatalf("stalled at %d of %d", c.frames, sent)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
}
