package ops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport/mem"
)

// syncLog is a slog handler's output, safe to read while written.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// outsideIP is an address of this host off loopback, or "" when it has
// none (the test that needs one skips).
func outsideIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

func TestAuth_CheckListen(t *testing.T) {
	if err := (Auth{}).CheckListen("admin-addr", "0.0.0.0:7400"); err == nil || !strings.Contains(err.Error(), "--admin-addr 0.0.0.0:7400") || !strings.Contains(err.Error(), "--admin-token") {
		t.Fatalf("every interface without a token: %v", err)
	}
	for _, a := range []string{"127.0.0.1:7400", "[::1]:7400", "localhost:7400", ""} {
		if err := (Auth{}).CheckListen("admin-addr", a); err != nil {
			t.Errorf("%q: %v", a, err)
		}
	}
	if err := (Auth{Token: "t"}).CheckListen("console-addr", "10.1.2.3:7500"); err != nil {
		t.Errorf("with a token: %v", err)
	}
}

// TestSurface_TokenOffLoopback: over real listeners on an address off
// loopback, HTTP and the console refuse a caller without the token (or
// with a wrong one), serve one with it, and log each mutating command
// with the caller's address and the token's id, never the token.
func TestSurface_TokenOffLoopback(t *testing.T) {
	ip := outsideIP()
	if ip == "" {
		t.Skip("no address off loopback on this host")
	}
	var logs syncLog
	const token = "s3cret-token"
	auth := Auth{Token: token, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	f := &fakeMember{status: MemberStatus{ID: 2, Role: "primary", Primary: 2, Epoch: 4, Members: []Peer{{ID: 2}, {ID: 3}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sv, err := Serve(ctx, MemberSurface(f, auth), auth, "admin-addr", ip+":0", "console-addr", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	addr := sv.HTTPAddr()
	if _, err := DefaultClient.FetchStatus(ctx, addr); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no token: %v, want ErrUnauthorized", err)
	}
	if _, err := (&Client{Token: "wrong"}).RequestTransfer(ctx, addr, 3); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("wrong token: %v, want ErrUnauthorized", err)
	}
	if len(f.transfer) != 0 {
		t.Fatal("a refused caller reached the member")
	}
	if err := DefaultClient.Ready(ctx, addr); err != nil {
		t.Fatalf("readyz needs no token: %v", err)
	}
	cl := &Client{Token: token}
	if st, err := cl.FetchStatus(ctx, addr); err != nil || st.ID != 2 {
		t.Fatalf("with the token: %+v, %v", st, err)
	}
	if h, err := cl.RequestTransfer(ctx, addr, 3); err != nil || h.To != 3 {
		t.Fatalf("transfer with the token: %+v, %v", h, err)
	}

	c, err := net.Dial("tcp", sv.ConsoleAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	ask := consoleAsker(t, c, rd)
	if b := ask(""); !strings.Contains(b, "auth TOKEN first") {
		t.Fatalf("banner off loopback: %q", b)
	}
	if out := ask("status"); !strings.Contains(out, "error: ops: unauthorized") {
		t.Fatalf("status before auth: %q", out)
	}
	if out := ask("auth nope"); !strings.Contains(out, "error: ops: unauthorized") {
		t.Fatalf("wrong auth: %q", out)
	}
	if out := ask("auth " + token); !strings.Contains(out, "authenticated as sha256:") {
		t.Fatalf("auth: %q", out)
	}
	if out := ask("transfer-primary 3"); !strings.Contains(out, `"to": 3`) {
		t.Fatalf("transfer on the console: %q", out)
	}
	if len(f.transfer) != 2 {
		t.Fatalf("member saw %d transfers, want 2", len(f.transfer))
	}
	log := logs.String()
	if strings.Contains(log, token) {
		t.Fatalf("the log holds the token:\n%s", log)
	}
	for _, via := range []string{"http", "console"} {
		if !strings.Contains(log, `msg="admin: command" cmd="transfer-primary 3" remote=`+ip) || !strings.Contains(log, "via="+via) || !strings.Contains(log, "token=sha256:") {
			t.Fatalf("no log line of the %s transfer with its caller:\n%s", via, log)
		}
	}
}

// consoleAsker sends a line and reads the answer up to the next prompt.
func consoleAsker(t *testing.T, c net.Conn, rd *bufio.Reader) func(string) string {
	return func(line string) string {
		t.Helper()
		if line != "" {
			fmt.Fprintf(c, "%s\n", line)
		}
		var b strings.Builder
		for !strings.HasSuffix(b.String(), "\n> ") && b.String() != "> " {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			s, err := rd.ReadString(' ')
			b.WriteString(s)
			if err != nil {
				t.Fatalf("console after %q: %v (read %q)", line, err, b.String())
			}
		}
		return b.String()
	}
}

// TestMemberReady: a standby is ready only once it holds within the
// bound of what the primary (asked over HTTP) published; no primary, or
// one that does not answer, is not ready, with the reason.
func TestMemberReady(t *testing.T) {
	prim := &fakeMember{status: MemberStatus{ID: 1, Role: "primary", Primary: 1, Published: 5000}}
	paddr := serve(t, prim)
	fetch := func(ctx context.Context, a string) (MemberStatus, error) { return DefaultClient.FetchStatus(ctx, a) }
	st := MemberStatus{ID: 2, Role: "standby", Primary: 1, Members: []Peer{{ID: 1, AdminAddr: paddr}, {ID: 2}}}
	for _, tc := range []struct {
		held uint64
		want string // "" ready
	}{{0, "catching up: holds 0 of 5000"}, {3975, "catching up"}, {3976, ""}, {5000, ""}} {
		st.Contiguous = tc.held
		err := memberReady(st, fetch)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrNotReady) || !strings.Contains(fmt.Sprint(err), tc.want)) {
			t.Errorf("holding %d: %v, want %q", tc.held, err, tc.want)
		}
	}
	if err := memberReady(MemberStatus{ID: 2, Epoch: 3, RaftState: "Candidate"}, fetch); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "no primary known") {
		t.Errorf("no primary: %v", err)
	}
	gone := st
	gone.Members = []Peer{{ID: 1, AdminAddr: "127.0.0.1:1"}}
	if err := memberReady(gone, fetch); !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("primary gone: %v", err)
	}
	if err := memberReady(MemberStatus{ID: 1, Primary: 1, Role: "sealing"}, fetch); !errors.Is(err, ErrNotReady) {
		t.Errorf("a sealing primary: %v", err)
	}
}

// TestMemberCollector_Scrape: /metrics shows the member's status as
// Prometheus metrics, and each epoch change it led once in the
// histograms, however often scraped.
func TestMemberCollector_Scrape(t *testing.T) {
	f := &fakeMember{status: MemberStatus{ID: 2, Role: "primary", RaftState: "Leader", Term: 7, Epoch: 4, Primary: 2, Stable: 90, Published: 99,
		Change: &Change{Epoch: 4, SealUS: 1500, StartedUS: 20000}, Members: []Peer{{ID: 1}, {ID: 2}, {ID: 3}}}}
	addr := serve(t, f)
	get := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	get()
	out := get()
	for _, want := range []string{"seqd_epoch 4\n", "seqd_stable_seq 90\n", "seqd_published_seq 99\n", "seqd_primary_id 2\n", "seqd_members 3\n",
		`seqd_raft_state{state="Leader"} 1`, `seqd_raft_state{state="Follower"} 0`, `seqd_member_role{role="primary"} 1`, "seqd_raft_term 7\n",
		"seqd_seal_duration_seconds_count 1\n", "seqd_seal_duration_seconds_sum 0.0015\n", "seqd_election_duration_seconds_sum 0.02\n", "go_goroutines "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	f.mu.Lock()
	f.status.Change = &Change{Epoch: 5, SealUS: 500, StartedUS: 3000}
	f.mu.Unlock()
	if out := get(); !strings.Contains(out, "seqd_election_duration_seconds_count 2\n") {
		t.Errorf("a second epoch change not counted:\n%s", out)
	}
}

// TestNodeSurface_AdminAction: a node program's AdminAction runs as
// `node ACCOUNT ACTION` over HTTP, and the node's status and readiness
// come from the real node.
func TestNodeSurface_AdminAction(t *testing.T) {
	netw, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.Account = "GW"
	n, err := node.New(cfg, nopHandler{}, netw.Client())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := n.AddAdminAction(node.AdminAction{Name: "send-time", Help: "send the time", Run: func(args []string) (string, error) {
		got = append(got, args...)
		return "time sent", nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := n.AddAdminAction(node.AdminAction{Name: "status", Run: func([]string) (string, error) { return "", nil }}); !errors.Is(err, node.ErrAdminAction) {
		t.Fatalf("an action named status: %v", err)
	}
	srv := httptest.NewServer(NodeSurface(Auth{}, KindNode, "GW", n, netw.Client()).Handler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if out, err := DefaultClient.Exec(ctx, addr, "GW send-time now", nil); err != nil || out != "time sent" || len(got) != 1 || got[0] != "now" {
		t.Fatalf("action: %q, %v (args %q)", out, err, got)
	}
	var ns NodeStatus
	if _, err := DefaultClient.Exec(ctx, addr, "node GW status", &ns); err != nil || ns.Account != "GW" {
		t.Fatalf("node status: %+v, %v", ns, err)
	}
	ps, err := DefaultClient.FetchProcess(ctx, addr)
	if err != nil || ps.Process != KindNode || ps.Node == nil {
		t.Fatalf("process status: %+v, %v", ps, err)
	}
	if _, err := DefaultClient.Exec(ctx, addr, "GW open", nil); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("open: %v, want ErrNotSupported", err)
	}
}

type nopHandler struct{}

func (nopHandler) OnMessage(*node.Message) {}

// TestSurface_ReadOnlyToken: off loopback, the read-only token reads
// (status, metrics) but every command that changes something is refused
// with ErrForbidden (403) before it reaches the member, on HTTP (the
// command language and the older routes) and on the console; the
// operator token runs it. transfer?to=abc is refused as bad arguments
// and never reaches the member, for any caller.
func TestSurface_ReadOnlyToken(t *testing.T) {
	ip := outsideIP()
	if ip == "" {
		t.Skip("no address off loopback on this host")
	}
	auth := Auth{Token: "op-token", ReadToken: "ro-token", Logger: slog.New(slog.DiscardHandler)}
	f := &fakeMember{status: MemberStatus{ID: 2, Role: "primary", Primary: 2, Epoch: 4, Members: []Peer{{ID: 2}, {ID: 3}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sv, err := Serve(ctx, MemberSurface(f, auth), auth, "admin-addr", ip+":0", "console-addr", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	addr := sv.HTTPAddr()
	ro, op := &Client{Token: "ro-token"}, &Client{Token: "op-token"}
	if st, err := ro.FetchStatus(ctx, addr); err != nil || st.ID != 2 {
		t.Fatalf("read-only status: %+v, %v", st, err)
	}
	if _, err := ro.RequestTransfer(ctx, addr, 3); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("read-only transfer: %v, want forbidden", err)
	}
	if _, err := ro.Exec(ctx, addr, "remove-member 3", nil); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("read-only remove-member: %v, want forbidden", err)
	}
	if len(f.transfer) != 0 || len(f.removed) != 0 {
		t.Fatalf("a read-only caller reached the member: transfers %v removed %v", f.transfer, f.removed)
	}
	for _, tok := range []string{"ro-token", "op-token"} {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/transfer?to=abc", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[string]int{"ro-token": http.StatusForbidden, "op-token": http.StatusBadRequest}[tok]; resp.StatusCode != want {
			t.Fatalf("transfer?to=abc with %s: %d, want %d", tok, resp.StatusCode, want)
		}
	}
	if len(f.transfer) != 0 {
		t.Fatalf("transfer?to=abc reached the member: %v", f.transfer)
	}
	if h, err := op.RequestTransfer(ctx, addr, 3); err != nil || h.To != 3 {
		t.Fatalf("operator transfer: %+v, %v", h, err)
	}

	c, err := net.Dial("tcp", sv.ConsoleAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := consoleAsker(t, c, bufio.NewReader(c))
	ask("")
	if out := ask("auth ro-token"); !strings.Contains(out, "authenticated as read-only") {
		t.Fatalf("auth: %q", out)
	}
	if out := ask("transfer-primary 3"); !strings.Contains(out, "forbidden") {
		t.Fatalf("read-only transfer on the console: %q", out)
	}
	if len(f.transfer) != 1 {
		t.Fatalf("member saw %d transfers, want 1 (the operator's)", len(f.transfer))
	}
}
