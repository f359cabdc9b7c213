package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

func TestLoad_ClearErrors(t *testing.T) {
	ca := tlstest.New(t, "site")
	other := tlstest.New(t, "other")
	good := ca.Config(t, "member-1")
	foreign := other.Config(t, "member-1")
	a, err := tlsconf.NewAuthority("old", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oldCA := ca.Dir + "/old-ca.crt"
	if err := a.WriteCA(oldCA); err != nil {
		t.Fatal(err)
	}
	expired, err := a.Issue(ca.Dir, "expired", oldCA, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	empty := ca.Dir + "/empty.pem"
	os.WriteFile(empty, []byte("not pem\n"), 0o644)
	with := func(f func(*tlsconf.Config)) tlsconf.Config { c := good; f(&c); return c }
	for _, tt := range []struct {
		name string
		cfg  tlsconf.Config
		want []string
	}{
		{"missing cert", with(func(c *tlsconf.Config) { c.CertFile = ca.Dir + "/nope.crt" }), []string{"security.tls-cert", "nope.crt", "no such file"}},
		{"key only", tlsconf.Config{KeyFile: good.KeyFile}, []string{"CertFile is empty"}},
		{"not pem", with(func(c *tlsconf.Config) { c.CAFile = empty }), []string{"security.tls-ca", "no PEM block"}},
		{"wrong key", with(func(c *tlsconf.Config) { c.KeyFile = foreign.KeyFile }), []string{"security.tls-key", "does not match"}},
		{"other CA", with(func(c *tlsconf.Config) { c.CertFile, c.KeyFile = foreign.CertFile, foreign.KeyFile }), []string{"is not signed by security.tls-ca", "not signed by the configured CA"}},
		{"expired", expired, []string{"expired at"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tlsconf.Load(tt.cfg)
			if !errors.Is(err, tlsconf.ErrConfig) {
				t.Fatalf("Load: %v, want ErrConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("Load: %q does not say %q", err, w)
				}
			}
		})
	}
	if id, err := tlsconf.Load(tlsconf.Config{}); id != nil || err != nil {
		t.Fatalf("Load(off) = %v, %v", id, err)
	}
	id, err := tlsconf.Load(good)
	if err != nil || id.Name() != "member-1" {
		t.Fatalf("Load(good) = %v, %v", id, err)
	}
}

// handshake runs one handshake over a real socket: the server's error
// and the client's (after a read, as TLS 1.3 reports a refused client
// certificate only then).
func handshake(t *testing.T, srv, cl *tls.Config) (serverErr, clientErr error, peer string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	names := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, srv)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		names <- tlsconf.PeerName(tc)
		if err == nil {
			_, err = tc.Write([]byte("x"))
		}
		errc <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cl)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		_, err = io.ReadFull(c, b[:])
		c.Close()
	}
	serverErr = <-errc
	return serverErr, tlsconf.Explain(ln.Addr().String(), err), <-names
}

func TestHandshake_MutualAndRefused(t *testing.T) {
	ca := tlstest.New(t, "site")
	other := tlstest.New(t, "other")
	m1, m2 := ca.Identity(t, "member-1"), ca.Identity(t, "member-2")
	node := ca.Identity(t, "node-SHOP")
	rogue := other.Identity(t, "member-3")
	members := tlsconf.Prefixes("member-")

	se, ce, peer := handshake(t, m1.Server(members), m2.Client(members))
	if se != nil || ce != nil || peer != "member-2" {
		t.Fatalf("member to member: server %v, client %v, peer %q", se, ce, peer)
	}
	rc := rogue.Client(nil)
	rc.VerifyConnection = nil // a rogue that trusts any server
	se, ce, _ = handshake(t, m1.Server(members), rc)
	if !errors.Is(se, tlsconf.ErrUnknownCA) || ce == nil || !strings.Contains(ce.Error(), "the peer refused this process's certificate") {
		t.Fatalf("another CA's client: server %v, client %v", se, ce)
	}
	se, ce, _ = handshake(t, m1.Server(members), node.Client(nil))
	if !errors.Is(se, tlsconf.ErrIdentity) || !strings.Contains(se.Error(), `"node-SHOP" is not one of member-*`) || ce == nil {
		t.Fatalf("a node on a members' port: server %v, client %v", se, ce)
	}
	_, ce, _ = handshake(t, rogue.Server(nil), m1.Client(members))
	if !errors.Is(ce, tlsconf.ErrUnknownCA) || !strings.Contains(ce.Error(), "the peer's certificate was refused") {
		t.Fatalf("a rogue server: client %v", ce)
	}
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if se, _, _ = handshake(t, m1.Server(nil), noCert); se == nil {
		t.Fatal("a client without a certificate was served")
	}
	old := m2.Client(nil)
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if se, _, _ = handshake(t, m1.Server(nil), old); se == nil || !strings.Contains(se.Error(), "version") {
		t.Fatalf("TLS 1.2 client: server %v, want a version refusal", se)
	}
}
