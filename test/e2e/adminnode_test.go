package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/ops/page"
)

// TestCLI_AdminNodeFindsDeploymentByGossip: `seqd admin-node` is the
// gossip seed; three cluster members and a replayer join it. Its
// /v1/deployment shows the three members with the primary they print
// and the replayer, its page is served (and a member's page lists the
// replayer too), and its console answers status, list, transfer-primary
// and an unknown command as an operator meets them.
func TestCLI_AdminNodeFindsDeploymentByGossip(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seed, httpAddr, console := freeTCPAddr(t), freeTCPAddr(t), freeTCPAddr(t)
	an := startLineProc(t, ctx, bin, []string{"admin-node", "--gossip.bind", seed, "--gossip.name", "admin",
		"--http-addr", httpAddr, "--console-addr", console, "--refresh", "200ms"}, "admin node", false)
	an.await(t, ctx, regexp.MustCompile(`^admin-node: ready http=`), 0, "the admin node's ready line")
	net0 := udpArgs(groups(2727))
	r := startCluster(t, ctx, bin, append(append([]string{}, net0...), "--gossip", seed), "lan")
	startReplayer(t, ctx, bin, append([]string{"--dir", t.TempDir(), "--nak-addr", freeUDPAddr(t), "--rewind-addr", freeTCPAddr(t),
		"--gossip", seed, "--gossip.name", "rep-1"}, net0...))

	deployment := func() page.Status {
		var s page.Status
		if resp, err := http.Get("http://" + httpAddr + "/v1/deployment"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&s)
			resp.Body.Close()
		}
		return s
	}
	// The primary and epoch the members print now (raft may change the
	// leader by itself on a loaded machine).
	var p *clusterProc
	var epoch uint64
	var s page.Status
	for {
		s = deployment()
		p, epoch, _ = r.primary(ctx, 1)
		if len(s.Members) == 3 && s.Primary == uint64(p.id) && s.Epoch == epoch && len(s.Replayers) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the admin node shows %+v: want 3 members, primary %d of epoch %d, replayer rep-1", s, p.id, epoch)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s.Replayers[0].Name != "rep-1" || s.Unhealthy {
		t.Fatalf("deployment %+v: want replayer rep-1 and healthy", s)
	}
	// A member started with --gossip lists the replayers on its own page.
	for {
		var ms page.Status
		if resp, err := http.Get("http://" + r.admin[0] + "/ui/status.json"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&ms)
			resp.Body.Close()
		}
		if len(ms.Replayers) == 1 && ms.Replayers[0].Name == "rep-1" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member 1's page shows replayers %+v, want rep-1", ms.Replayers)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get("http://" + httpAddr + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `id="primary"`) {
		t.Fatalf("GET /ui/: %s", resp.Status)
	}

	c, err := net.DialTimeout("tcp", console, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	rd := bufio.NewReader(c)
	if l, _ := rd.ReadString('\n'); !strings.Contains(l, "type help") {
		t.Fatalf("console greeting %q", l)
	}
	ask := func(cmd string) string {
		t.Helper()
		if _, err := io.WriteString(c, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("console %q: %v after %q", cmd, err, b.String())
			}
			b.WriteString(l)
			if l == "ok\n" || strings.HasPrefix(l, "error: ") {
				return b.String()
			}
		}
	}
	p, epoch, _ = r.primary(ctx, 1)
	if out := ask("status"); !strings.Contains(out, "primary="+itoa(p.id)+" epoch="+itoa(int(epoch))+" ") || strings.Count(out, "\nmember ") != 3 || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("console status:\n%s", out)
	}
	if out := ask("list"); strings.Count(out, " sequencer ") != 3 || !strings.Contains(out, "rep-1") {
		t.Fatalf("console list:\n%s", out)
	}
	// A planned handover through the console: the members print the new
	// primary, and the deployment shows it.
	out := ask("transfer-primary")
	if !strings.HasPrefix(out, "primary "+itoa(p.id)+" -> ") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("console transfer-primary:\n%s", out)
	}
	np, ne, _ := r.primary(ctx, epoch+1)
	if np.id == p.id {
		t.Fatalf("after transfer-primary member %d is still primary (epoch %d)", p.id, ne)
	}
	for s = deployment(); s.Primary != uint64(np.id) || s.Epoch < ne; s = deployment() {
		if ctx.Err() != nil {
			t.Fatalf("after transfer-primary the admin node shows primary %d epoch %d, want %d of %d", s.Primary, s.Epoch, np.id, ne)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := ask("frobnicate"); !strings.Contains(out, `error: adminnode: unknown command "frobnicate": try help`) {
		t.Fatalf("console unknown command:\n%s", out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
