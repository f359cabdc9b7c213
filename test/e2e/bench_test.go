package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLI_BenchFailsWhenAChildDies: `seqd bench` whose node child is
// killed ends at once with that child's error (its exit status and last
// stderr lines), instead of waiting for a result line that will never
// come.
func TestCLI_BenchFailsWhenAChildDies(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bench := exec.CommandContext(ctx, bin, "bench", "--transport", "udp", "--nodes", "2", "--count", "50000000", "--size", "256")
	var stdout, stderr syncBuffer
	bench.Stdout, bench.Stderr = &stdout, &stderr
	if err := bench.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill one sender as soon as both run.
	var victim int
	for victim == 0 && ctx.Err() == nil {
		nodes := childrenRunning(bench.Process.Pid, "node")
		if len(nodes) == 2 {
			victim = nodes[1]
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if victim == 0 {
		t.Fatalf("bench started no two nodes:\n%s", stderr.String())
	}
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := bench.Wait()
	took := time.Since(killed)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("bench after its child was killed: %v (context %v), %v later\nstdout:\n%s\nstderr:\n%s", err, ctx.Err(), took, stdout.String(), stderr.String())
	}
	s := stderr.String()
	if !strings.Contains(s, "died (signal: killed)") || !strings.Contains(s, "its last stderr lines") || !strings.Contains(s, "sender") {
		t.Fatalf("bench error does not name the dead child and its status:\n%s", s)
	}
	t.Logf("bench ended %v after its child was killed: %s", took.Round(time.Millisecond), s[strings.LastIndex(s, "seqd: "):])
}

// childrenRunning returns the pids of pid's children whose command line
// has word as the subcommand.
func childrenRunning(pid int, word string) []int {
	var out []int
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", c, "cmdline"))
			args := strings.Split(string(cmdline), "\x00")
			if len(args) > 1 && args[1] == word {
				n, _ := strconv.Atoi(c)
				out = append(out, n)
			}
		}
	}
	return out
}
