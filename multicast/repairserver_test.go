package multicast

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// pollRepair polls ep until h saw a frame or a deadline passes.
func pollRepair(t *testing.T, ep interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, got func() bool, h transport.Handler) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !got() {
		if time.Now().After(deadline) {
			t.Fatal("nothing arrived")
		}
		if _, err := ep.Poll(h, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepairServer_AnswersFromItsAddress: a Client that names the repair
// server with AddSource reaches it with SendTo; the unicast answer comes
// back labelled with the source's Peer (not the sequencer's), and a
// Publish reaches every member of the stream group.
func TestRepairServer_AnswersFromItsAddress(t *testing.T) {
	cfg := testConfig(t)
	rs, err := NewRepairServer(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	addr := rs.LocalAddr()
	if addr.Port() == 0 {
		t.Fatalf("LocalAddr %v has no port", addr)
	}
	cl, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	src, err := cl.AddSource(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.SendTo(src, []byte("nak")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	var asker transport.Peer
	var asked []byte
	pollRepair(t, rs, func() bool { return asked != nil }, func(f []byte, from transport.Peer) {
		asked, asker = bytes.Clone(f), from
	})
	if string(asked) != "nak" || asker == transport.NoPeer {
		t.Fatalf("server got %q from %d", asked, asker)
	}
	if err := rs.SendTo(asker, []byte("repair")); err != nil {
		t.Fatal(err)
	}
	if err := rs.Publish([]byte("to-all")); err != nil {
		t.Fatal(err)
	}
	if err := rs.Flush(); err != nil {
		t.Fatal(err)
	}
	got := map[string]transport.Peer{}
	pollRepair(t, cl, func() bool { return len(got) == 2 }, func(f []byte, from transport.Peer) {
		got[string(f)] = from
	})
	if p, ok := got["repair"]; !ok || p != src {
		t.Fatalf("unicast answer from peer %d (%v), want the source's %d", p, ok, src)
	}
	if p, ok := got["to-all"]; !ok || p != transport.NoPeer {
		t.Fatalf("published answer from peer %d (%v), want the stream's NoPeer", p, ok)
	}
}
