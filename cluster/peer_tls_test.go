package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

// TestPeerServer_TLSMembersOnly: with TLS, a member's fetch reaches the
// peer server (answered: this one serves no store); a node's certificate,
// another CA's, and a plain client get nothing, and the server counts
// them. A member does not believe a peer port that is not a member's.
func TestPeerServer_TLSMembersOnly(t *testing.T) {
	ca, other := tlstest.New(t, "site"), tlstest.New(t, "rogue")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultPeerServerConfig()
	cfg.TLS = ca.Identity(t, MemberName(1)).Server(membersOnly)
	ps, err := NewPeerServer(cfg, nil, ln)
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve()
	defer ps.Close()
	addr := ps.Addr().String()
	fetch := func(p PeerClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := p.Fetch(ctx, addr, 1, 5, func([]byte) error { return nil })
		return err
	}
	if err := fetch(peerClientOf(ca.Identity(t, MemberName(2)))); !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "serves no store") {
		t.Fatalf("member 2's fetch: %v, want the server's answer (no store)", err)
	}
	node := PeerClient{TLS: ca.Identity(t, "node-SHOP").Client(membersOnly)}
	rogue := PeerClient{TLS: other.Identity(t, MemberName(2)).Client(nil)}
	rogue.TLS.VerifyConnection = nil
	for name, p := range map[string]PeerClient{"node": node, "other CA": rogue, "plain": {}} {
		err := fetch(p)
		if err == nil || errors.Is(err, ErrFetchRefused) {
			t.Fatalf("%s's fetch: %v, want no answer", name, err)
		}
		if name != "plain" && !strings.Contains(err.Error(), "the peer refused this process's certificate") {
			t.Fatalf("%s's fetch: %v, want the refusal explained", name, err)
		}
	}
	// The client sees the refusal (the handshake's alert) before the
	// server's goroutine counts it: wait for the count.
	for end := time.Now().Add(5 * time.Second); ps.Refused() < 3 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := ps.Refused(); n != 3 {
		t.Fatalf("Refused = %d, want 3", n)
	}
	// A member does not fetch from a port whose certificate is a node's.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	cfg.TLS = ca.Identity(t, "node-X").Server(nil)
	fake, err := NewPeerServer(cfg, nil, ln2)
	if err != nil {
		t.Fatal(err)
	}
	go fake.Serve()
	defer fake.Close()
	addr = fake.Addr().String()
	if err := fetch(peerClientOf(ca.Identity(t, MemberName(2)))); err == nil || !strings.Contains(err.Error(), `"node-X" is not a member`) {
		t.Fatalf("fetch from a node's port: %v", err)
	}
}
