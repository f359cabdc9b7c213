package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/internal/tlsconf/tlstest"
	"github.com/seqd/seqd/ops/page"
)

// tlsArgs are the flags of identity cfg.
func tlsArgs(cfg tlsconf.Config) []string {
	return []string{"--security.tls-cert", cfg.CertFile, "--security.tls-key", cfg.KeyFile, "--security.tls-ca", cfg.CAFile}
}

// TestCluster_TLSKillPrimaryUnderLoad is TestCluster_TCPKillPrimaryUnderLoad
// with mutual TLS everywhere (issue 16): each member holds member-ID's
// certificate (Raft, the peer port's seal and fetch, the TCP stream), the
// nodes node-ACCOUNT's, all of one CA. The primary is SIGKILLed under
// load: the survivors elect over TLS Raft, seal and fetch over the TLS
// peer port, and every node delivers the same stream with no gap or
// repeat, each acked command once.
func TestCluster_TLSKillPrimaryUnderLoad(t *testing.T) {
	ca := tlstest.New(t, "site")
	addrs := strings.Join([]string{freeTCPAddr(t), freeTCPAddr(t), freeTCPAddr(t)}, ",")
	tcpNet := []string{"--transport", "tcp", "--tcp.addr", addrs}
	nodeNet := append(append([]string{}, tcpNet...), tlsArgs(ca.Config(t, "node-drill"))...)
	members := map[int][]string{}
	for id := 1; id <= 3; id++ {
		members[id] = tlsArgs(ca.Config(t, fmt.Sprintf("member-%d", id)))
	}
	killPrimaryUnderLoad(t, "tls", tcpNet, nodeNet, nodeNet, func(id int) []string { return members[id] })
}

// TestTLS_WrongCertificateRefused: a sequencer over TCP with TLS; a tail
// whose certificate another CA signed gets no stream, and both say why
// (the sequencer: not signed by the configured CA; the tail: the peer
// refused this process's certificate); a tail of the right CA delivers
// the stream; a member whose certificate names another member, and a
// process whose key file is missing, refuse to start with an error
// naming the key and the file.
func TestTLS_WrongCertificateRefused(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ca, rogue := tlstest.New(t, "site"), tlstest.New(t, "rogue")
	addr := freeTCPAddr(t)
	net := []string{"--transport", "tcp", "--tcp.addr", addr}
	seq := startLineProc(t, ctx, bin, append(append([]string{"sequencer", "--session", "7"}, net...), tlsArgs(ca.Config(t, "sequencer"))...), "sequencer", false)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(seq.Stderr(), "sequencer: ready") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}

	bad := startLineProc(t, ctx, bin, append(append([]string{"tail", "--format", "json"}, net...), tlsArgs(rogueTrusting(t, rogue, ca, "node-evil"))...), "rogue tail", false)
	// A node of the right CA sends and reads its commands back over TLS
	// (it checks the stream: dense, its commands once, in order).
	out, errOut, err := runSeqd(ctx, bin, nil, append(append([]string{"node", "--account", "TLS", "--count", "2000", "--size", "100"}, net...), tlsArgs(ca.Config(t, "node-TLS"))...)...)
	if err != nil || !regexp.MustCompile(`node: ok`).MatchString(out+errOut) {
		t.Fatalf("node over TLS: %v\n%s\n%s", err, out, tailOf(errOut, 2000))
	}
	for time.Now().Before(deadline) && !(strings.Contains(seq.Stderr(), "not signed by the configured CA") && strings.Contains(bad.Stderr(), "the peer refused this process's certificate")) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(seq.Stderr(), "not signed by the configured CA") {
		t.Fatalf("the sequencer did not say why it refused the rogue:\n%s", tailOf(seq.Stderr(), 2000))
	}
	if !strings.Contains(bad.Stderr(), "the peer refused this process's certificate") {
		t.Fatalf("the rogue tail did not say it was refused:\n%s", tailOf(bad.Stderr(), 2000))
	}
	if n := len(bad.output()); n != 0 {
		t.Fatalf("the rogue tail printed %d lines of the stream", n)
	}

	_, errOut, err = runSeqd(ctx, bin, nil, append(append([]string{"sequencer", "--cluster", "--id", "1", "--dir", t.TempDir(),
		"--peers", fmt.Sprintf("1@%s@%s@%s", freeTCPAddr(t), freeTCPAddr(t), freeTCPAddr(t))}, net...), tlsArgs(ca.Config(t, "member-2"))...)...)
	if err == nil || !strings.Contains(errOut, "security.tls-cert") || !strings.Contains(errOut, "member-1") {
		t.Fatalf("member 1 with member-2's certificate: %v\n%s", err, tailOf(errOut, 1000))
	}
	cfg := ca.Config(t, "node-x")
	cfg.KeyFile += ".missing"
	_, errOut, err = runSeqd(ctx, bin, nil, append(append([]string{"tail"}, net...), tlsArgs(cfg)...)...)
	if err == nil || !strings.Contains(errOut, "security.tls-key") || !strings.Contains(errOut, ".missing") || !strings.Contains(errOut, "no such file") {
		t.Fatalf("a missing key file: %v\n%s", err, tailOf(errOut, 1000))
	}
}

// rogueTrusting is an identity of CA other that also trusts ca's servers
// (its CA file holds both), so that ca's server is the one to refuse it.
func rogueTrusting(t *testing.T, other, ca *tlstest.CA, name string) tlsconf.Config {
	t.Helper()
	cfg := other.Config(t, name)
	a, _ := os.ReadFile(other.CAFile)
	b, _ := os.ReadFile(ca.CAFile)
	cfg.CAFile = filepath.Join(t.TempDir(), "both.crt")
	if err := os.WriteFile(cfg.CAFile, append(a, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCluster_TLSAdmin: a group of three with mutual TLS (Raft, the peer
// port) serves its admin endpoints over TLS too, with the caller's
// certificate as its role: `seqd admin status` with an admin-*
// certificate sees one primary and every member ready (a standby's
// readiness asks the primary over TLS with its member certificate);
// without TLS it gets a clear error; a monitor-* certificate may read
// but not transfer; the admin certificate transfers the primary.
func TestCluster_TLSAdmin(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ca := tlstest.New(t, "site")
	members := map[int][]string{}
	for id := 1; id <= 3; id++ {
		members[id] = tlsArgs(ca.Config(t, fmt.Sprintf("member-%d", id)))
	}
	r := startClusterWith(t, ctx, bin, udpArgs(groups(913)), "test", nil, func(id int) []string { return members[id] })
	old, e0, _ := r.primary(ctx, 1)
	addrs := strings.Join(r.admin, ",")
	admin := func(cert string, args ...string) (string, error) {
		a := append([]string{"admin"}, args[0], "--addr", addrs, "--timeout", "5s")
		if cert != "" {
			a = append(a, tlsArgs(ca.Config(t, cert))...)
		}
		out, errOut, err := runSeqd(ctx, bin, nil, append(a, args[1:]...)...)
		return out + errOut, err
	}

	var out string
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if out, err = admin("admin-ops", "status"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("admin status over TLS never exited 0 (every member ready): %v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("primary=%d", old.id)) || strings.Count(out, " standby ") != 2 {
		t.Fatalf("admin status over TLS does not show primary %d and two standbys:\n%s", old.id, out)
	}
	if out, err = admin("", "status"); err == nil || !strings.Contains(out, "speaks only TLS") {
		t.Fatalf("admin status without TLS: %v, want a refusal that says the endpoint speaks TLS\n%s", err, out)
	}
	// The admin node asks the members over TLS with its certificate.
	anHTTP := freeTCPAddr(t)
	an := startLineProc(t, ctx, bin, append([]string{"admin-node", "--members", addrs, "--http-addr", anHTTP, "--console-addr", "", "--refresh", "200ms"},
		tlsArgs(ca.Config(t, "admin-node"))...), "admin node", false)
	an.await(t, ctx, regexp.MustCompile(`^admin-node: ready http=`), 0, "the admin node's ready line")
	var dep page.Status
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		dep = page.Status{}
		if resp, err := http.Get("http://" + anHTTP + "/v1/deployment"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&dep)
			resp.Body.Close()
		}
		if len(dep.Members) == 3 && dep.Primary == uint64(old.id) && dep.Members[0].Error == "" && dep.Members[1].Error == "" && dep.Members[2].Error == "" {
			break
		}
	}
	if len(dep.Members) != 3 || dep.Primary != uint64(old.id) {
		t.Fatalf("the admin node over TLS shows %+v, want 3 members and primary %d", dep, old.id)
	}
	for _, m := range dep.Members {
		if m.Error != "" || m.Role == "unreachable" {
			t.Fatalf("the admin node could not ask member %d over TLS: %s %s", m.ID, m.Role, m.Error)
		}
	}

	to := old.id%3 + 1
	if out, err = admin("monitor-prom", "transfer-primary", fmt.Sprint(to)); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("transfer with a monitor certificate: %v, want forbidden\n%s", err, out)
	}
	if out, err = admin("admin-ops", "transfer-primary", fmt.Sprint(to)); err != nil {
		t.Fatalf("transfer with the admin certificate: %v\n%s", err, out)
	}
	if p, e1, _ := r.primary(ctx, e0+1); p.id != to {
		t.Fatalf("after the transfer to %d: member %d is primary of epoch %d\n%s", to, p.id, e1, out)
	}
	for _, p := range r.procs {
		if s := p.Stderr(); strings.Contains(s, "peer request refused") {
			t.Errorf("member %d refused a peer request (a member spoke plain to a TLS peer port):\n%s", p.id, tailOf(s, 2000))
		}
		if s := p.Stderr(); strings.Contains(s, "TLS handshake error") && !strings.Contains(s, "HTTP request to an HTTPS server") {
			t.Logf("member %d logged handshake errors:\n%s", p.id, tailOf(s, 1000))
		}
	}
}
