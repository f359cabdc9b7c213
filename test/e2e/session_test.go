package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCluster_SessionPerDirectory, as a user meets it: two clusters
// bootstrapped one after the other on the same groups have different
// sessions, and a store of the first refuses the second's stream with an
// error that names both sessions and the directory: a replayer (it used
// to extend the old session's directory with the new cluster's stream,
// every cluster being session 1) and a member whose stream directory is
// the old cluster's.
func TestCluster_SessionPerDirectory(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	net := udpArgs(groups(1414))
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, append(args, net...)...).CombinedOutput()
		return string(out), err
	}

	a := startClusterIn(t, ctx, bin, net, "lan", nil)
	a.primary(ctx, 1)
	dir := t.TempDir()
	nak := freeUDPAddr(t)
	rep := startReplayer(t, ctx, bin, append([]string{"--dir", dir, "--nak-addr", nak}, net...))
	if out, err := run("node", "--account", "OLD", "--count", "20", "--size", "20"); err != nil {
		t.Fatalf("node of cluster A: %v\n%s", err, out)
	}
	// The replayer holds what it heard (contiguous, nonzero).
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := seqdOutput(ctx, bin, nil, "replay", "--dir", dir)
		if strings.Count(out, "OLD") >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := rep.stop(t)
	if field(t, stopped, "contiguous") == 0 {
		t.Fatalf("replayer of cluster A stored nothing: %q", stopped)
	}
	member3 := a.procs[2].args[slices.Index(a.procs[2].args, "--dir")+1]
	for _, p := range a.procs {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-p.exited
	}

	// Cluster B: member 3's directory has cluster A's stream store (and
	// no Raft state: a new member of a new cluster).
	dir3 := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(member3, "stream"), dir3).CombinedOutput(); err != nil {
		t.Fatalf("copy member 3's stream store: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir3, "stream")); err != nil {
		t.Fatal(err)
	}
	b := startClusterIn(t, ctx, bin, net, "lan", []string{"", "", dir3})
	b.primary(ctx, 1)
	if out, err := run("node", "--account", "NEW", "--count", "10", "--size", "20"); err != nil {
		t.Fatalf("node of cluster B: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"replayer", "--dir", dir, "--nak-addr", nak}, net...)...)
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(regexp.QuoteMeta(dir) + ` holds session (\d+), the stream is session (\d+) \(one session per directory`).FindStringSubmatch(string(out))
	if cmd.ProcessState.ExitCode() != 1 || m == nil {
		t.Fatalf("replayer of cluster A's directory on cluster B's stream: %v, want exit 1 and %q holds session A, the stream is session B\n%s", err, dir, out)
	}
	oldSession, _ := strconv.ParseUint(m[1], 10, 64)
	newSession, _ := strconv.ParseUint(m[2], 10, 64)
	if oldSession == 0 || newSession == 0 || newSession == oldSession {
		t.Fatalf("sessions of cluster A %d and cluster B %d: want two different ids\n%s", oldSession, newSession, out)
	}
	t.Logf("replayer: %s", strings.TrimSpace(string(out)))

	// Member 3 of B refuses A's stream store, naming both sessions.
	m3 := b.procs[2]
	select {
	case <-m3.exited:
	case <-ctx.Done():
		t.Fatal("member 3 on cluster A's stream store did not stop")
	}
	all := strings.Join(m3.output(), "\n") + m3.Stderr()
	want3 := fmt.Sprintf("the failover state names session %d: standby: member 3: replayer: packet of another session: %s holds session %d", newSession, filepath.Join(dir3, "stream"), oldSession)
	if !strings.Contains(all, want3) {
		t.Fatalf("member 3 on cluster A's store: want %q in\n%s", want3, tailOf(all, 3000))
	}
}
