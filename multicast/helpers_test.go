package multicast

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/transport"
)

// groupSerial gives each test session in this process its own groups.
var groupSerial atomic.Uint32

// testConfig returns a loopback config whose groups and ports no other
// session on the host uses: the groups are picked per session (sockets set
// IP_MULTICAST_ALL=0, so they hear only the groups they joined) and the
// ports are free ephemeral ports the kernel handed out a moment ago.
func testConfig(t testing.TB) Config {
	t.Helper()
	c := DefaultConfig()
	serial := groupSerial.Add(1)
	base := rand.Uint32N(200) + 20 // keep away from the defaults (239.77.0.x)
	c.StreamGroup = fmt.Sprintf("239.77.%d.%d:%d", base, 2*(serial%120)+1, freePort(t))
	c.CommandGroup = fmt.Sprintf("239.77.%d.%d:%d", base, 2*(serial%120)+2, freePort(t))
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// session opens a server and n clients with cfg and closes them at the end.
func session(t testing.TB, cfg Config, n int) (*Server, []*Client) {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	cls := make([]*Client, n)
	for i := range cls {
		if cls[i], err = NewClient(cfg); err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		t.Cleanup(func() { cls[i].Close() })
	}
	return srv, cls
}

// indexed is a frame of size bytes whose first 8 bytes carry its index.
func indexed(buf []byte, i uint64) []byte {
	binary.LittleEndian.PutUint64(buf, i)
	for j := 8; j < len(buf); j++ {
		buf[j] = byte(i) + byte(j)
	}
	return buf
}

// collector checks frames by index and records them.
type collector struct {
	got []uint64
	bad error
}

func (c *collector) handle(frame []byte, _ transport.Peer) {
	if len(frame) < 8 {
		c.bad = fmt.Errorf("short frame %d bytes", len(frame))
		return
	}
	i := binary.LittleEndian.Uint64(frame)
	for j := 8; j < len(frame); j++ {
		if frame[j] != byte(i)+byte(j) {
			c.bad = fmt.Errorf("frame %d corrupt at byte %d", i, j)
			return
		}
	}
	c.got = append(c.got, i)
}

// pollUntil polls p until the collector holds want frames; the bound is
// for liveness only (a stuck transport fails instead of hanging).
func pollUntil(t testing.TB, p interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, c *collector, want int) {
	t.Helper()
	h := c.handle
	deadline := time.Now().Add(10 * time.Second)
	for len(c.got) < want && time.Now().Before(deadline) {
		if _, err := p.Poll(h, 20*time.Millisecond); err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
	if c.bad != nil {
		t.Fatal(c.bad)
	}
	if len(c.got) < want {
		t.Fatalf("got %d frames, want %d", len(c.got), want)
	}
}
