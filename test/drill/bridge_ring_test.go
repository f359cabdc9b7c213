package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
)

// A ring of three sites, A -> B -> C -> A: site A's stream reaches B and
// C once each, and the bridge that would carry it from C back to A
// refuses it (the hellos name A as its origin; that link has a TCP
// channel only, so they come on its control connection) instead of
// republishing it on A's own groups.
func TestBridge_RingOfThreeSitesOncePerSite(t *testing.T) {
	exe, err := seqdBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	port := freeport.GroupPortsOr(6, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	site := map[string][]string{}
	for i, s := range []string{"A", "B", "C"} {
		site[s] = []string{"--transport", "udp", "--udp.stream-group", fmt.Sprintf("239.%d.%d.%d:%d", 101+2*i, a, b, port+2*i),
			"--udp.command-group", fmt.Sprintf("239.%d.%d.%d:%d", 102+2*i, a, b, port+2*i+1)}
	}
	addrs, err := freeport.Addrs(6)
	if err != nil {
		t.Fatal(err)
	}
	c := newChildren(t, ctx, exe)
	start, waitFor := c.start, c.waitFor
	_, seqOut := start("sequencer", append([]string{"sequencer"}, site["A"]...)...)
	waitFor("sequencer", seqOut, "sequencer: ready")
	// link joins two sites; a link with udp false has a TCP channel only
	// (its hellos come on the channel's control connection).
	link := func(from, to string, i int, origin string, udp bool) (*exec.Cmd, *lockedBuffer) {
		tcpAddr, udpAddr := addrs[2*i], addrs[2*i+1]
		var chans []string
		if udp {
			chans = []string{"--udp", udpAddr}
		}
		_, so := start("send "+from, append(append([]string{"bridge", "--role", "send", "--site", from, "--origin", origin, "--tcp", tcpAddr,
			"--dir", filepath.Join(dir, "send-"+from), "--nak-addr", "127.0.0.1:0"}, chans...), site[from]...)...)
		waitFor("send "+from, so, "bridge: ready")
		return start("receive "+to, append(append([]string{"bridge", "--role", "receive", "--site", to, "--tcp", tcpAddr,
			"--dir", filepath.Join(dir, "receive-"+to)}, chans...), site[to]...)...)
	}
	link("A", "B", 0, "A", true)
	link("B", "C", 1, "A", true)
	back, backOut := link("C", "A", 2, "A", false)
	const n = 2000
	readC, readCOut := start("reader C", append([]string{"node", "--read-only", "--expect", fmt.Sprint(n), "--timeout", "90s"}, site["C"]...)...)
	readA, readAOut := start("reader A", append([]string{"node", "--read-only", "--expect", fmt.Sprint(n), "--timeout", "90s"}, site["A"]...)...)
	sender, senderOut := start("sender A", append([]string{"node", "--account", "RING", "--count", fmt.Sprint(n), "--rate", "4000", "--timeout", "90s"}, site["A"]...)...)
	for _, w := range []struct {
		name string
		c    *exec.Cmd
		out  *lockedBuffer
	}{{"sender A", sender, senderOut}, {"reader C", readC, readCOut}, {"reader A", readA, readAOut}} {
		if err := w.c.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", w.name, err, lastLines(w.out.String(), 5))
		}
		// seqd node verifies the stream: dense, every command once.
		if !strings.Contains(w.out.String(), "node: ok ") {
			t.Fatalf("%s: %s", w.name, lastLines(w.out.String(), 5))
		}
	}
	// The nodes start without waiting for the bridge from C back to A to
	// refuse: while it sits on A's groups, not yet knowing the stream's
	// origin, it answers none of their NAKs (before the fix, a Gone from
	// its empty store stopped a node of A: "seqs 1..2 no longer
	// retained", 2 runs in about 10).
	if err := back.Wait(); err == nil || !strings.Contains(backOut.String(), "stream would go back to its origin") {
		t.Fatalf("the bridge from C back to A did not refuse the stream (exit %v):\n%s", err, lastLines(backOut.String(), 5))
	}
}
