package rewind

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/replayer"
)

// dyingListener hands out connections that die (closed by the replayer's
// side) once they wrote limit bytes: a replayer killed mid-rewind.
type dyingListener struct {
	net.Listener
	limit int
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dyingConn{Conn: c, left: l.limit}, nil
}

type dyingConn struct {
	net.Conn
	mu   sync.Mutex
	left int
}

func (c *dyingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left <= 0 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	if len(b) > c.left {
		n, _ := c.Conn.Write(b[:c.left])
		c.left = 0
		c.Conn.Close()
		return n, net.ErrClosed
	}
	n, err := c.Conn.Write(b)
	c.left -= n
	return n, err
}

// serveDying serves s's rewinds on loopback through connections that die
// after limit bytes (0: never); it returns the address.
func serveDying(t *testing.T, s *replayer.Store, limit int) string {
	t.Helper()
	cfg := replayer.DefaultRewindConfig()
	cfg.BufferBytes = 64 << 10
	var wrap func(net.Listener) net.Listener
	if limit > 0 {
		wrap = func(l net.Listener) net.Listener { return &dyingListener{Listener: l, limit: limit} }
	}
	_, addr := serveRewind(t, s, cfg, wrap)
	return addr
}

// TestRewind_SourceResumesThroughManyDeaths: every replayer a node
// rewinds from dies after a few hundred KiB (mid-frame); a RewindSource
// (as gossip gives one) names the next each time, asked with the seq the
// rewind resumes from, which never goes back; the node delivers every
// message once, in order (the counter checks seq by seq).
func TestRewind_SourceResumesThroughManyDeaths(t *testing.T) {
	const n, size = 100_000, 100
	var addrs []string
	for i := 0; i < 3; i++ {
		s := fillStore(t, t.TempDir(), n, size)
		t.Cleanup(func() { s.Close() })
		addrs = append(addrs, serveDying(t, s, 700<<10+i*1000))
	}
	h := &counter{want: n, done: make(chan struct{})}
	nd := rewindingNode(t, benchSession, n, 0, h)
	nd.SetRewindAddr(addrs[0])
	var asked []uint64
	nd.SetRewindSource(func(from uint64, failed string) string {
		asked = append(asked, from)
		for i, a := range addrs {
			if a == failed {
				return addrs[(i+1)%len(addrs)]
			}
		}
		t.Errorf("failed %q is none of the replayers", failed)
		return ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- nd.Run(ctx) }()
	select {
	case <-h.done:
		cancel()
		<-errc
	case err := <-errc:
		t.Fatalf("rewind with failover: %v (delivered %d)", err, h.n)
	}
	if h.err || h.n != n || h.last != n {
		t.Fatalf("delivered %d messages up to seq %d, gap or repeat %v; want %d in order", h.n, h.last, h.err, n)
	}
	if nd.RewindFailovers() < 3 || uint64(len(asked)) != nd.RewindFailovers() {
		t.Fatalf("RewindFailovers = %d, source asked %d times: the replayers did not die mid-rewind", nd.RewindFailovers(), len(asked))
	}
	for i := 1; i < len(asked); i++ {
		if asked[i] < asked[i-1] {
			t.Fatalf("resume seqs went back: %v", asked)
		}
	}
	t.Logf("%d messages through %d failovers, resumed at %v", h.n, nd.RewindFailovers(), asked)
}
