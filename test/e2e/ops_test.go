package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/ops"
)

// adminRC runs `seqd admin args...` and returns its output and exit code.
func adminRC(ctx context.Context, bin string, args ...string) (string, int) {
	out, err := exec.CommandContext(ctx, bin, append([]string{"admin"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	return string(out) + err.Error(), -1
}

// TestOps_RestartedMemberReadyOnlyOnceCaughtUp: a standby killed while a
// node publishes comes back on its directory; its /readyz answers "not
// ready" with the reason until it holds what the primary published
// (within the bound), and every "ready" it answers comes when it does.
// `seqd admin status` exits 0 with all ready, 3 with a member down, and 4
// with two of three down; `seqd admin wait-ready` waits for the member.
func TestOps_RestartedMemberReadyOnlyOnceCaughtUp(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	net := udpArgs(groups(1919))
	r := startCluster(t, ctx, bin, net, "test")
	p, _, _ := r.primary(ctx, 1)
	for _, a := range r.admin {
		if out, rc := adminRC(ctx, bin, "wait-ready", "--addr", a, "--timeout", "30s"); rc != 0 {
			t.Fatalf("wait-ready %s: rc %d\n%s", a, rc, out)
		}
	}
	if out, rc := adminRC(ctx, bin, "status", "--addr", r.admin[0]); rc != 0 || !strings.Contains(out, "primary="+fmt.Sprint(p.id)) {
		t.Fatalf("status of a healthy cluster: rc %d, want 0 and primary=%d\n%s", rc, p.id, out)
	}
	// A transfer to the primary itself says so, once, and changes nothing.
	out, rc := adminRC(ctx, bin, "transfer-primary", "--addr", r.admin[p.id%3], fmt.Sprint(p.id))
	if want := fmt.Sprintf("admin: member %d is the primary already (epoch 1): nothing to do\n", p.id); rc != 0 || out != want {
		t.Fatalf("transfer-primary to the primary: rc %d, %q; want 0, %q", rc, out, want)
	}
	// Nothing listening: exit 1, in words, not Go's Get "http://...".
	dead := freeTCPAddr(t)
	if out, rc := adminRC(ctx, bin, "status", "--addr", dead); rc != 1 || strings.Contains(out, `Get "http`) || !strings.Contains(out, dead+": connection refused") {
		t.Fatalf("status of nothing: rc %d\n%s", rc, out)
	}
	s := r.procs[p.id%3] // a standby
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	if out, rc := adminRC(ctx, bin, "status", "--addr", r.admin[p.id-1]); rc != 3 || !strings.Contains(out, "unreachable") {
		t.Fatalf("status with member %d down: rc %d, want 3 (degraded)\n%s", s.id, rc, out)
	}
	const count = 30000
	if out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "READY", "--count", fmt.Sprint(count), "--size", "64", "--timeout", "60s"}, net...)...).CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, tailOf(string(out), 2000))
	}
	published := p.published(t, ctx, r)
	if published < count {
		t.Fatalf("primary published %d, want >= %d", published, count)
	}
	// The primary's /metrics counts the commands its loop sequenced (as
	// of its last copy, every 50 ms); the live standby's, what it stored.
	var pm map[string]float64
	for ctx.Err() == nil {
		if pm = scrape(t, r.admin[p.id-1]); pm["seqd_sequencer_commands_total"] >= count {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pm["seqd_published_seq"] != float64(published) || pm[`seqd_member_role{role="primary"}`] != 1 {
		t.Fatalf("primary's metrics: published %v (status %d), role %v", pm["seqd_published_seq"], published, pm[`seqd_member_role{role="primary"}`])
	}
	live := r.procs[(p.id+1)%3]
	if sm := scrape(t, r.admin[live.id-1]); sm["seqd_standby_appended_packets_total"] == 0 || sm[`seqd_transport_bytes_total{direction="received",endpoint="standby"}`] < count*64 {
		t.Fatalf("standby %d's metrics: appended %v packets, received %v bytes", live.id, sm["seqd_standby_appended_packets_total"], sm[`seqd_transport_bytes_total{direction="received",endpoint="standby"}`])
	}

	back := r.start(ctx, s.id, s.args)
	r.procs[s.id-1] = back
	addr := r.admin[s.id-1]
	var notReady []string
	for ctx.Err() == nil {
		err := ops.DefaultClient.Ready(ctx, addr)
		if errors.Is(err, ops.ErrUnreachable) {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if err != nil {
			if !errors.Is(err, ops.ErrNotReady) {
				t.Fatalf("readyz: %v", err)
			}
			if len(notReady) == 0 || notReady[len(notReady)-1] != err.Error() {
				notReady = append(notReady, err.Error())
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		// Ready: it holds what was published, within the bound.
		st, err := ops.FetchStatus(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if st.Contiguous+ops.MemberReadyLagSeqs < published {
			t.Fatalf("ready while holding %d of %d published", st.Contiguous, published)
		}
		t.Logf("ready holding %d of %d; before: %q", st.Contiguous, published, notReady)
		break
	}
	if len(notReady) == 0 {
		t.Fatal("the restarted member never answered not ready: it cannot have caught up 30000 seqs before its endpoint opened")
	}
	for _, why := range notReady {
		if !strings.Contains(why, "not ready: ") || len(why) < len("ops: not ready: ")+5 {
			t.Fatalf("not ready without a reason: %q", why)
		}
	}
	if out, rc := adminRC(ctx, bin, "wait-ready", "--addr", addr, "--timeout", "20s"); rc != 0 {
		t.Fatalf("wait-ready after catch-up: rc %d\n%s", rc, out)
	}

	// Two of three down: no quorum, exit 4, and the header names no
	// stale primary when the primary is one of them.
	for _, q := range r.procs {
		if q.id != s.id {
			if err := q.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-q.exited
		}
	}
	out, rc = adminRC(ctx, bin, "status", "--addr", addr, "--timeout", "3s")
	if rc != 4 || !strings.Contains(out, "primary=none") {
		t.Fatalf("status with two of three down: rc %d, want 4 and primary=none\n%s", rc, out)
	}
	if strings.Contains(out, `Get "http`) {
		t.Fatalf("a raw Go error reached the user:\n%s", out)
	}
	t.Logf("%s", out)
}

var metricLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$`)

// scrape reads addr's /metrics into name{labels} -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := metricLine.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			out[m[1]+m[2]] = v
		}
	}
	return out
}

// TestOps_MetricsAndConsoleAfterTraffic: after a node's commands went
// through a standalone sequencer, the sequencer's /metrics shows them
// (commands, messages, stream bytes), a replayer's shows what it stored
// and that it is ready, and the sequencer's console answers status,
// help and errors over a real TCP connection.
func TestOps_MetricsAndConsoleAfterTraffic(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := udpArgs(groups(2929))
	seqAdmin, seqConsole, repAdmin := freeTCPAddr(t), freeTCPAddr(t), freeTCPAddr(t)
	seq, lines, stderr := startSequencer(t, ctx, bin, append([]string{"--admin-addr", seqAdmin, "--console-addr", seqConsole}, net...))
	defer stopSequencer(t, seq, lines, stderr)
	rep := startLineProc(t, ctx, bin, append([]string{"replayer", "--dir", t.TempDir(), "--nak-addr", freeUDPAddr(t), "--admin-addr", repAdmin}, net...), "replayer", false)
	tailAdmin := freeTCPAddr(t)
	startLineProc(t, ctx, bin, append([]string{"tail", "--admin-addr", tailAdmin}, net...), "tail", false)
	const count, size = 2000, 100
	if out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "SCRAPE", "--count", fmt.Sprint(count), "--size", fmt.Sprint(size), "--timeout", "40s"}, net...)...).CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, tailOf(string(out), 2000))
	}
	// The agent snapshots its counters every 50 ms while busy, at each
	// heartbeat when idle: the scrape sees the last commands soon after.
	m := scrape(t, seqAdmin)
	for ctx.Err() == nil && m["seqd_sequencer_commands_total"] < count {
		time.Sleep(50 * time.Millisecond)
		m = scrape(t, seqAdmin)
	}
	for name, min := range map[string]float64{
		"seqd_sequencer_commands_total":                                       count,
		"seqd_sequencer_messages_total":                                       count,
		"seqd_published_seq":                                                  count,
		`seqd_transport_bytes_total{direction="sent",endpoint="stream"}`:      count * size,
		`seqd_transport_frames_total{direction="received",endpoint="stream"}`: 1,
	} {
		if m[name] < min {
			t.Errorf("sequencer %s = %v, want >= %v", name, m[name], min)
		}
	}
	if m[`seqd_sequencer_rejected_commands_total{reason="too_large"}`] != 0 || m["seqd_sequencer_commands_total"] > count+10 {
		t.Errorf("sequencer counted %v commands, %v rejected too large: want %d, 0", m["seqd_sequencer_commands_total"], m[`seqd_sequencer_rejected_commands_total{reason="too_large"}`], count)
	}
	published := m["seqd_published_seq"]
	// The replayer stores the stream up to what was published.
	for ctx.Err() == nil {
		select {
		case <-rep.exited:
			t.Fatalf("replayer exited: %v", rep.Err())
		default:
		}
		rm := scrape(t, repAdmin)
		if rm["seqd_replayer_held_seq"] >= published {
			if rm["seqd_replayer_first_seq"] != 1 {
				t.Fatalf("replayer's range starts at %v, want 1", rm["seqd_replayer_first_seq"])
			}
			if rm["seqd_delivered_messages_total"] < count || rm["seqd_replayer_appended_bytes_total"] < count*size {
				t.Fatalf("replayer holds %v but delivered %v messages, appended %v bytes", rm["seqd_replayer_held_seq"], rm["seqd_delivered_messages_total"], rm["seqd_replayer_appended_bytes_total"])
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := ops.DefaultClient.Ready(ctx, repAdmin); err != nil {
		t.Fatalf("replayer holding the stream not ready: %v", err)
	}
	ps, err := ops.DefaultClient.FetchProcess(ctx, repAdmin)
	if err != nil || ps.Process != ops.KindReplayer || ps.Replayer == nil || float64(ps.Replayer.Contiguous) < published || !ps.Ready {
		t.Fatalf("replayer status %+v (%+v), %v", ps, ps.Replayer, err)
	}

	// A tail's position: it delivered everything stable, no lag.
	for ctx.Err() == nil {
		tm := scrape(t, tailAdmin)
		if tm["seqd_delivered_seq"] >= published {
			if tm["seqd_receiver_lag_seqs"] != 0 || tm["seqd_stable_seq"] < published || tm["seqd_delivered_messages_total"] < count {
				t.Fatalf("tail delivered up to %v: lag %v, stable %v, delivered %v messages", tm["seqd_delivered_seq"], tm["seqd_receiver_lag_seqs"], tm["seqd_stable_seq"], tm["seqd_delivered_messages_total"])
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, a := range []string{seqAdmin, repAdmin, tailAdmin} {
		resp, err := http.Get("http://" + a + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "ok" {
			t.Fatalf("%s /healthz: %d %q", a, resp.StatusCode, b)
		}
	}
	var ns ops.NodeStatus
	if _, err := ops.DefaultClient.Exec(ctx, tailAdmin, "tail status", &ns); err != nil || float64(ns.DeliveredSeq) < published || ns.Rewinding {
		t.Fatalf("tail status over the command language: %+v, %v", ns, err)
	}

	// The console, over TCP as telnet would.
	c, err := (&netDialer{}).dial(ctx, seqConsole)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	ask := func(line string) string {
		t.Helper()
		if line != "" {
			fmt.Fprintf(c, "%s\r\n", line)
		}
		var b strings.Builder
		for {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			s, err := rd.ReadString(' ')
			b.WriteString(s)
			if strings.HasSuffix(b.String(), "\n> ") {
				return strings.TrimSuffix(b.String(), "> ")
			}
			if err != nil {
				t.Fatalf("console after %q: %v (read %q)", line, err, b.String())
			}
		}
	}
	if banner := ask(""); !strings.Contains(banner, "admin console") {
		t.Fatalf("banner %q", banner)
	}
	if out := ask("status"); !strings.Contains(out, `"process": "sequencer"`) || !strings.Contains(out, fmt.Sprintf(`"published": %d`, int(published))) {
		t.Fatalf("console status:\n%s", out)
	}
	if out := ask("help"); !strings.Contains(out, "status") || !strings.Contains(out, "help [COMMAND]") {
		t.Fatalf("console help:\n%s", out)
	}
	if out := ask("transfer-primary 2"); !strings.HasPrefix(out, "error: ops: unknown command") {
		t.Fatalf("a member's command on a standalone sequencer: %q", out)
	}
	fmt.Fprintf(c, "quit\n")
	if rest, _ := io.ReadAll(rd); !strings.Contains(string(rest), "bye") {
		t.Fatalf("quit: %q", rest)
	}
}

type netDialer struct{}

func (netDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
