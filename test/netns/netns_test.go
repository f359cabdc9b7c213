// Package netns runs seqd processes on separate "hosts": network
// namespaces joined by veth pairs to a bridge that lives in a namespace of
// its own, so the machine's own network is never touched. Traffic goes
// only to the namespaces' own addresses. Where namespaces are not
// permitted (no root, no iproute2, a sandbox), the tests skip and say why.
package netns

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lab is a set of namespaces on one bridge.
type lab struct {
	t      *testing.T
	prefix string
	bridge string
	hosts  []string
	addrs  []string
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newLab builds hosts h0..h(n-1) with addresses 10.199.<id>.(i+1)/24. It
// skips the test when namespaces cannot be made, and removes everything
// it made when the test ends, whatever happens.
func newLab(t *testing.T, n int) *lab {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns: `ip` (iproute2) not installed; install iproute2 to run the multi-host tests")
	}
	id := os.Getpid() % 200
	l := &lab{t: t, prefix: fmt.Sprintf("seqd%d", os.Getpid())}
	l.bridge = l.prefix + "-br"
	if err := run("ip", "netns", "add", l.bridge); err != nil {
		t.Skipf("netns: network namespaces not permitted here (%v); run as root on Linux to test several hosts", err)
	}
	t.Cleanup(l.cleanup)
	must := func(args ...string) {
		t.Helper()
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("ip", "-n", l.bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	must("ip", "-n", l.bridge, "link", "set", "br0", "up")
	for i := 0; i < n; i++ {
		h := fmt.Sprintf("%s-h%d", l.prefix, i)
		addr := fmt.Sprintf("10.199.%d.%d", id, i+1)
		must("ip", "netns", "add", h)
		l.hosts = append(l.hosts, h)
		l.addrs = append(l.addrs, addr)
		peer := fmt.Sprintf("p%d", i)
		must("ip", "link", "add", "eth0", "netns", h, "type", "veth", "peer", "name", peer, "netns", l.bridge)
		must("ip", "-n", l.bridge, "link", "set", peer, "master", "br0", "up")
		must("ip", "-n", h, "addr", "add", addr+"/24", "dev", "eth0")
		must("ip", "-n", h, "link", "set", "eth0", "up", "multicast", "on")
		must("ip", "-n", h, "link", "set", "lo", "up")
		must("ip", "-n", h, "route", "add", "224.0.0.0/4", "dev", "eth0")
	}
	return l
}

func (l *lab) cleanup() {
	for _, h := range l.hosts {
		_ = run("ip", "netns", "del", h)
	}
	_ = run("ip", "netns", "del", l.bridge)
}

// cmd runs the seqd binary inside host i.
func (l *lab) cmd(ctx context.Context, i int, bin string, args ...string) *exec.Cmd {
	a := append([]string{"netns", "exec", l.hosts[i], bin}, args...)
	return exec.CommandContext(ctx, "ip", a...)
}

func buildSeqd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "seqd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/seqd/seqd/cmd/seqd").CombinedOutput()
	if err != nil {
		t.Fatalf("build seqd: %v\n%s", err, out)
	}
	return bin
}

// TestNetns_MulticastAcrossHosts: a sequencer on one host, two sending
// nodes on two others, 5% loss injected at every node's socket; both nodes
// must finish with every command acknowledged and the same stream.
func TestNetns_MulticastAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts processes")
	}
	l := newLab(t, 3)
	bin := buildSeqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	common := []string{"--transport", "udp", "--udp.interface", "eth0",
		"--udp.stream-group", "239.77.9.1:9300", "--udp.command-group", "239.77.9.2:9301"}
	seq := l.cmd(ctx, 0, bin, append([]string{"sequencer", "--session", "42"}, common...)...)
	seqOut, err := seq.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var seqErr bytes.Buffer
	seq.Stderr = &seqErr
	if err := seq.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = seq.Process.Kill()
		_ = seq.Wait()
		if t.Failed() {
			t.Logf("sequencer stderr:\n%s", seqErr.String())
		}
	}()
	sc := bufio.NewScanner(seqOut)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "sequencer: ready") {
		t.Fatalf("sequencer did not start: %q %s", sc.Text(), seqErr.String())
	}

	const count = 3000
	// Two tails, on the two node hosts, print every command; the streams
	// they print must be identical (total order across hosts).
	type result struct {
		out []byte
		err error
	}
	tails := make([]chan result, 2)
	for i := range tails {
		tails[i] = make(chan result, 1)
		args := append([]string{"tail", "--format", "json", "--from", "1", "--internal=false", "--count", fmt.Sprint(2 * count)}, common...)
		c := l.cmd(ctx, i+1, bin, args...)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		go func(ch chan result) {
			out, err := c.Output()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, stderr.String())
			}
			ch <- result{out, err}
		}(tails[i])
	}
	time.Sleep(300 * time.Millisecond) // the tails join before traffic starts

	results := make(chan result, 2)
	for i := 1; i <= 2; i++ {
		args := append([]string{"node", "--account", fmt.Sprintf("H%d", i), "--count", fmt.Sprint(count), "--expect", fmt.Sprint(count), "--size", "200"}, common...)
		c := l.cmd(ctx, i, bin, args...)
		c.Env = append(os.Environ(), fmt.Sprintf("SEQD_FAULTS=loss=0.05,dup=0.01,reorder=0.01,seed=%d", i))
		go func() {
			out, err := c.CombinedOutput()
			results <- result{out, err}
		}()
	}
	for i := 0; i < 2; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("node failed: %v\n%s", r.err, r.out)
		}
		var okLine string
		for _, line := range strings.Split(string(r.out), "\n") {
			if strings.HasPrefix(line, "node: ok") {
				okLine = line
			}
		}
		if okLine == "" {
			t.Fatalf("node printed no result:\n%s", r.out)
		}
		if !strings.Contains(string(r.out), "FAULT INJECTION ENABLED") {
			t.Errorf("node did not log the injected faults loudly:\n%s", r.out)
		}
		t.Log(okLine)
		if !strings.Contains(okLine, fmt.Sprintf("acked=%d ", count)) {
			t.Fatalf("not every command acknowledged: %s", okLine)
		}
	}
	var outs [2][]byte
	for i := range tails {
		r := <-tails[i]
		if r.err != nil {
			t.Fatalf("tail on host %d: %v", i+1, r.err)
		}
		outs[i] = r.out
	}
	if n := bytes.Count(outs[0], []byte("\n")); n != 2*count {
		t.Fatalf("tail printed %d commands, want %d", n, 2*count)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("the two hosts saw different streams")
	}
}
