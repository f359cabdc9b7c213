package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/ops"
)

// TestBridge_AdminSurface: a bridge end started with --admin-addr serves
// the admin surface as every process does (issue 19): /v1/status with a
// bridge section naming each channel, /readyz once it follows the
// session, and /metrics with per-channel counters that count the traffic
// really carried (both channels brought packets; their first arrivals add
// up to the packets merged).
func TestBridge_AdminSurface(t *testing.T) {
	exe, err := seqdBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 19))
	port := freeport.GroupPortsOr(6, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	site := func(i int) []string {
		return []string{"--transport", "udp", "--udp.stream-group", fmt.Sprintf("239.%d.%d.%d:%d", 111+2*i, a, b, port+2*i),
			"--udp.command-group", fmt.Sprintf("239.%d.%d.%d:%d", 112+2*i, a, b, port+2*i+1)}
	}
	addrs, err := freeport.Addrs(4)
	if err != nil {
		t.Fatal(err)
	}
	tcpAddr, udpAddr, sendAdmin, recvAdmin := addrs[0], addrs[1], addrs[2], addrs[3]
	c := newChildren(t, ctx, exe)
	start, waitFor := c.start, c.waitFor
	_, seqOut := start("sequencer", append([]string{"sequencer"}, site(0)...)...)
	waitFor("sequencer", seqOut, "sequencer: ready")
	_, so := start("send", append([]string{"bridge", "--role", "send", "--site", "A", "--tcp", tcpAddr, "--udp", udpAddr,
		"--dir", filepath.Join(dir, "send"), "--admin-addr", sendAdmin}, site(0)...)...)
	waitFor("send", so, "bridge: ready")
	_, ro := start("receive", append([]string{"bridge", "--role", "receive", "--site", "B", "--tcp", tcpAddr, "--udp", udpAddr,
		"--dir", filepath.Join(dir, "receive"), "--admin-addr", recvAdmin}, site(1)...)...)
	waitFor("receive", ro, "bridge: ready")
	const n = 500
	reader, readerOut := start("reader B", append([]string{"node", "--read-only", "--expect", fmt.Sprint(n), "--timeout", "60s"}, site(1)...)...)
	sender, senderOut := start("sender A", append([]string{"node", "--account", "ADM", "--count", fmt.Sprint(n), "--rate", "2000", "--timeout", "60s"}, site(0)...)...)
	for _, w := range []struct {
		name string
		c    *exec.Cmd
		out  *lockedBuffer
	}{{"sender A", sender, senderOut}, {"reader B", reader, readerOut}} {
		if err := w.c.Wait(); err != nil || !strings.Contains(w.out.String(), "node: ok ") {
			t.Fatalf("%s: %v\n%s", w.name, err, lastLines(w.out.String(), 5))
		}
	}

	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, addr := range []string{sendAdmin, recvAdmin} {
		if code, body := get(addr, "/readyz"); code != http.StatusOK {
			t.Errorf("%s /readyz: %d %s", addr, code, body)
		}
		if code, body := get(addr, "/healthz"); code != http.StatusOK {
			t.Errorf("%s /healthz: %d %s", addr, code, body)
		}
	}
	_, body := get(recvAdmin, "/v1/status")
	var ps ops.ProcessStatus
	if err := json.Unmarshal([]byte(body), &ps); err != nil {
		t.Fatalf("status %q: %v", body, err)
	}
	if ps.Process != ops.KindBridge || ps.Bridge == nil || ps.Bridge.Role != "receive" || ps.Bridge.Site != "B" || len(ps.Bridge.Channels) != 2 {
		t.Fatalf("receiving end's status: %s", body)
	}
	if ps.Bridge.NextSeq <= n || ps.Bridge.Session == 0 {
		t.Errorf("receiving end holds to %d (session %d), want past the %d commands: %s", ps.Bridge.NextSeq, ps.Bridge.Session, n, body)
	}
	_, metrics := get(recvAdmin, "/metrics")
	value := func(name, channel string) float64 {
		re := regexp.MustCompile(`(?m)^` + name + `\{channel="` + regexp.QuoteMeta(channel) + `"\} (\S+)$`)
		m := re.FindStringSubmatch(metrics)
		if m == nil {
			t.Fatalf("no %s{channel=%q} in /metrics:\n%s", name, channel, metrics)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	var firsts float64
	for _, ch := range ps.Bridge.Channels {
		if p := value("seqd_bridge_channel_packets_total", ch.Name); p == 0 {
			t.Errorf("channel %s brought no packet", ch.Name)
		}
		firsts += value("seqd_bridge_channel_first_total", ch.Name)
	}
	merged := regexp.MustCompile(`(?m)^seqd_bridge_merged_packets_total (\S+)$`).FindStringSubmatch(metrics)
	if merged == nil {
		t.Fatalf("no seqd_bridge_merged_packets_total:\n%s", metrics)
	}
	if m, _ := strconv.ParseFloat(merged[1], 64); m == 0 || firsts != m {
		t.Errorf("first arrivals %v over the channels, merged packets %v: each merged packet has one first arrival", firsts, m)
	}
	_, sendMetrics := get(sendAdmin, "/metrics")
	if !regexp.MustCompile(`(?m)^seqd_bridge_udp_packets_total [1-9]`).MatchString(sendMetrics) {
		t.Errorf("sending end's /metrics has no UDP packets sent:\n%s", sendMetrics)
	}
}
