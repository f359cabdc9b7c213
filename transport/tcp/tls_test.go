package tcp

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/internal/tlsconf/tlstest"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/transporttest"
)

// TestConformance_TLS runs the conformance suite over mutual TLS: a
// member's server, nodes' clients, certificates of one test CA.
func TestConformance_TLS(t *testing.T) {
	ca := tlstest.New(t, "site")
	srvID, clID := ca.Identity(t, "member-1"), ca.Identity(t, "node-SHOP")
	transporttest.Run(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
		cfg, _ := testConfig(t)
		cfg.TLS = srvID
		s, err := NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Addr, cfg.TLS, cfg.TLSPeers = s.Addr().String(), clID, tlsconf.Prefixes("member-")
		cls := make([]transport.Client, n)
		closers := []func() error{s.Close}
		for i := range cls {
			c, err := Dial(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cls[i] = c
			closers = append(closers, c.Close)
		}
		waitClients(t, s, n)
		return s, cls, func() {
			for _, c := range closers {
				c()
			}
		}
	})
}

// TestTLS_WrongCertificateRefused: a client whose certificate another CA
// signed never gets a slot, and both ends log why; a plain client is
// refused too; a server of another CA is refused by the client at Dial.
func TestTLS_WrongCertificateRefused(t *testing.T) {
	ca, other := tlstest.New(t, "site"), tlstest.New(t, "rogue")
	cfg, srvLogs := testConfig(t)
	cfg.TLS = ca.Identity(t, "member-1")
	s := newServer(t, cfg)

	rogue, clLogs := testConfig(t)
	rogue.Addr = s.Addr().String()
	rogue.TLS = trustingRogue(t, other, ca, "node-SHOP")
	c, err := Dial(rogue)
	if err != nil {
		t.Fatal(err) // TLS 1.3: the client's handshake ends before the server checks it
	}
	defer c.Close()
	plain, _ := testConfig(t)
	plain.Addr = s.Addr().String()
	pc, err := Dial(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	deadline := time.Now().Add(liveness)
	for !strings.Contains(clLogs.String(), "the peer refused this process's certificate") ||
		!strings.Contains(srvLogs.String(), "not signed by the configured CA") || s.Drops().RefusedConns < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged: server %q, client %q, refused %d", srvLogs, clLogs, s.Drops().RefusedConns)
		}
		_, _ = s.Poll(ignore, time.Millisecond)
		_, _ = c.Poll(ignore, time.Millisecond)
	}
	if n := s.Clients(); n != 0 {
		t.Fatalf("server holds %d clients, want 0", n)
	}

	// A rogue server: the client refuses it before Dial returns.
	rs, _ := testConfig(t)
	rs.TLS = other.Identity(t, "member-1")
	srv := newServer(t, rs)
	good, _ := testConfig(t)
	good.Addr = srv.Addr().String()
	good.TLS, good.TLSPeers = ca.Identity(t, "node-SHOP"), tlsconf.Prefixes("member-")
	if _, err := Dial(good); err == nil || !strings.Contains(err.Error(), "the peer's certificate was refused") || !strings.Contains(err.Error(), "not signed by the configured CA") {
		t.Fatalf("Dial to a rogue server: %v", err)
	}
}

// trustingRogue is an identity of CA other that also trusts ca's servers
// (its CA file holds both), so that ca's server is the one to refuse it.
func trustingRogue(t *testing.T, other, ca *tlstest.CA, name string) *tlsconf.Identity {
	t.Helper()
	cfg := other.Config(t, name)
	a, _ := os.ReadFile(other.CAFile)
	b, _ := os.ReadFile(ca.CAFile)
	cfg.CAFile = t.TempDir() + "/both.crt"
	if err := os.WriteFile(cfg.CAFile, append(a, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := tlsconf.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
