package rewind

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

const benchSession = 4242

// fillStore writes n messages of size bytes, batched as the sequencer
// batches them (1472-byte packets), into a store in dir.
func fillStore(b testing.TB, dir string, n, size int) *replayer.Store {
	cfg := replayer.DefaultConfig()
	cfg.Sync = replayer.SyncNone
	s, _, err := replayer.Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, wire.DefaultMaxPacketBytes)
	payload := make([]byte, size)
	var w wire.PacketWriter
	open := false
	flush := func() {
		if open && w.Count() > 0 {
			last := w.Bytes()
			wire.SetStable(buf, le64(last[24:])+uint64(w.Count())-1)
			if err := s.Append(w.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
		open = false
	}
	for q := uint64(1); q <= uint64(n); q++ {
		if !open || w.Room() < size {
			flush()
			if err := w.Reset(buf, wire.KindData, 1, benchSession, q, int64(q), 1); err != nil {
				b.Fatal(err)
			}
			open = true
		}
		payload[0] = byte(q)
		if err := w.Append(&wire.Record{Payload: payload, Time: int64(q), Account: wire.MustAccount("LOAD"), CmdSeq: q}); err != nil {
			b.Fatal(err)
		}
	}
	flush()
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	return s
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// idleClient is a live stream that only ever says where its tail is: one
// heartbeat, then silence (Poll waits, or until woken).
type idleClient struct {
	hb   []byte
	sent bool
	wake chan struct{}
	t    *time.Timer
}

func (c *idleClient) Send([]byte) error { return nil }
func (c *idleClient) Flush() error      { return nil }
func (c *idleClient) Close() error      { return nil }
func (c *idleClient) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *idleClient) Poll(h transport.Handler, wait time.Duration) (int, error) {
	if !c.sent {
		c.sent = true
		h(c.hb, transport.NoPeer)
		return 1, nil
	}
	if wait <= 0 {
		return 0, nil
	}
	c.t.Reset(wait)
	select {
	case <-c.wake:
	case <-c.t.C:
	}
	c.t.Stop()
	return 0, nil
}

type counter struct {
	n, want int
	done    chan struct{}
	err     bool
	last    uint64
}

func (c *counter) OnMessage(m *node.Message) {
	if m.Seq != c.last+1 {
		c.err = true
	}
	c.last = m.Seq
	c.n++
	if c.n == c.want {
		close(c.done)
	}
}

// BenchmarkRewind: one node rewinds a stored stream of 2M messages of 256
// bytes from a RewindServer over TCP on loopback (its live stream idle);
// msg/s is its delivery rate.
func BenchmarkRewind(b *testing.B) {
	const n, size = 2_000_000, 256
	s := fillStore(b, b.TempDir(), n, size)
	defer s.Close()
	_, addr := serveRewind(b, s, replayer.DefaultRewindConfig(), nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := &counter{want: n, done: make(chan struct{})}
		nd := rewindingNode(b, benchSession, n, 0, h)
		nd.SetRewindAddr(addr)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		t0 := time.Now()
		go func() { errc <- nd.Run(ctx) }()
		select {
		case <-h.done:
		case err := <-errc:
			b.Fatal(err)
		}
		el := time.Since(t0)
		cancel()
		<-errc
		if h.err {
			b.Fatal("gap or repeat")
		}
		b.ReportMetric(float64(n)/el.Seconds(), "msg/s")
	}
}
