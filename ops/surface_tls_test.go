package ops

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

// TestSurface_TLSRolesByCertificate: with Auth.TLS the admin HTTP
// endpoint and the console speak only TLS, on loopback too, and the
// caller's certificate gives its role: admin-* an operator, another of
// the CA read-only, none only the probes, one of another CA no
// connection; plain HTTP and a plain console get nothing.
func TestSurface_TLSRolesByCertificate(t *testing.T) {
	ca := tlstest.New(t, "seqd-ca")
	var logs syncLog
	auth := Auth{TLS: ca.Identity(t, "member-2"), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	f := &fakeMember{status: MemberStatus{ID: 2, Role: "primary", Primary: 2, Epoch: 4, Members: []Peer{{ID: 2}, {ID: 3}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sv, err := Serve(ctx, MemberSurface(f, auth), auth, "admin-addr", "127.0.0.1:0", "console-addr", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	addr := sv.HTTPAddr()

	op := &Client{TLS: ca.Identity(t, "admin-alice").Client(nil)}
	ro := &Client{TLS: ca.Identity(t, "monitor-prom").Client(nil)}
	noCert := ca.Identity(t, "nobody").Client(nil)
	noCert.Certificates = nil
	anon := &Client{TLS: noCert}
	other := &Client{TLS: tlstest.New(t, "other-ca").Identity(t, "admin-mallory").Client(nil)}

	if _, err := DefaultClient.FetchStatus(ctx, addr); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "speaks only TLS") {
		t.Fatalf("plain HTTP to a TLS admin endpoint: %v, want ErrUnauthorized saying it speaks only TLS", err)
	}
	if _, err := DefaultClient.RequestTransfer(ctx, addr, 3); err == nil {
		t.Fatal("a plain HTTP transfer was accepted")
	}
	if _, err := other.RequestTransfer(ctx, addr, 3); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("certificate of another CA: %v, want a refused handshake", err)
	}
	if _, err := anon.FetchStatus(ctx, addr); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no certificate, on loopback: %v, want ErrUnauthorized", err)
	}
	if err := anon.Ready(ctx, addr); err != nil {
		t.Fatalf("readyz without a certificate: %v", err)
	}
	if len(f.transfer) != 0 {
		t.Fatalf("a refused caller reached the member: %v", f.transfer)
	}
	if st, err := ro.FetchStatus(ctx, addr); err != nil || st.ID != 2 {
		t.Fatalf("read-only certificate, status: %+v, %v", st, err)
	}
	if _, err := ro.RequestTransfer(ctx, addr, 3); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("read-only certificate, transfer: %v, want forbidden", err)
	}
	if got := metricsOver(t, ctx, ro, addr); !strings.Contains(got, "go_goroutines") {
		t.Fatalf("metrics with a read-only certificate: %.200q", got)
	}
	if h, err := op.RequestTransfer(ctx, addr, 3); err != nil || h.To != 3 {
		t.Fatalf("operator certificate, transfer: %+v, %v", h, err)
	}
	if len(f.transfer) != 1 {
		t.Fatalf("member saw %d transfers, want 1", len(f.transfer))
	}
	if log := logs.String(); !strings.Contains(log, "token=cert:admin-alice") || !strings.Contains(log, "via=http") {
		t.Fatalf("the transfer's log line does not name the certificate:\n%s", log)
	}

	// The console: the certificate decides there too.
	console := func(id string) (func(string) string, func()) {
		c, err := tls.Dial("tcp", sv.ConsoleAddr(), ca.Identity(t, id).Client(nil))
		if err != nil {
			t.Fatalf("console as %s: %v", id, err)
		}
		return consoleAsker(t, c, bufio.NewReader(c)), func() { c.Close() }
	}
	ask, done := console("admin-bob")
	if b := ask(""); strings.Contains(b, "auth TOKEN first") {
		t.Fatalf("an operator's certificate was asked for a token: %q", b)
	}
	if out := ask("transfer-primary 3"); !strings.Contains(out, `"to": 3`) {
		t.Fatalf("operator transfer on the console: %q", out)
	}
	done()
	ask, done = console("node-shop")
	ask("")
	if out := ask("transfer-primary 3"); !strings.Contains(out, "forbidden") {
		t.Fatalf("read-only certificate, console transfer: %q", out)
	}
	if out := ask("status"); !strings.Contains(out, "primary") {
		t.Fatalf("read-only certificate, console status: %q", out)
	}
	done()
	if len(f.transfer) != 2 {
		t.Fatalf("member saw %d transfers, want 2", len(f.transfer))
	}

	// A plain console connection gets no prompt: the server waits for a
	// TLS hello and closes it.
	c, err := net.Dial("tcp", sv.ConsoleAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "transfer-primary 3\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	if strings.Contains(string(b), "> ") {
		t.Fatalf("a plain console connection got a prompt: %q", b)
	}
	if len(f.transfer) != 2 {
		t.Fatalf("a plain console transfer reached the member: %d transfers", len(f.transfer))
	}
}

// metricsOver reads /metrics with cl's certificate.
func metricsOver(t *testing.T, ctx context.Context, cl *Client, addr string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/metrics", nil)
	resp, err := cl.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}
