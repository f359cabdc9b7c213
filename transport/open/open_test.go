package open

import (
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/transport/tcp"
)

func freeLoopback(t *testing.T) string {
	t.Helper()
	return freeport.MustAddr(t)
}

// A node given a cluster's members starts during an election (no member
// accepts yet): it waits for the primary instead of failing at once.
func TestDialTCP_WaitsForAClusterPrimary(t *testing.T) {
	a, b := freeLoopback(t), freeLoopback(t)
	tc := tcp.DefaultConfig()
	tc.Addr, tc.Addrs = a, []string{a, b}
	tc.ReconnectMin = time.Millisecond
	up := make(chan *tcp.Server, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		sc := tcp.DefaultConfig()
		sc.Addr = b
		s, err := tcp.NewServer(sc)
		if err != nil {
			t.Error(err)
		}
		up <- s
	}()
	cl, err := DialTCP(tc)
	if s := <-up; s != nil {
		defer s.Close()
	}
	if err != nil {
		t.Fatalf("DialTCP = %v, want the member that came up", err)
	}
	defer cl.Close()
	if cl.ServerAddr() != b {
		t.Fatalf("connected to %s, want %s", cl.ServerAddr(), b)
	}

	// One address: no cluster, no wait.
	tc.Addr, tc.Addrs = freeLoopback(t), nil
	if _, err := DialTCP(tc); err == nil {
		t.Fatal("DialTCP to a single dead address succeeded")
	}
}
