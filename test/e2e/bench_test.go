package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestCLI_BenchRTTBreakdown: `seqd bench --mode rtt` splits every round
// trip into its hops (node, wire to the sequencer, sequencer, wire back,
// node), reports the median and p99 of each on its line, and writes them
// as CSV under --out. Every sample has all its instants, in order.
func TestCLI_BenchRTTBreakdown(t *testing.T) {
	bin := seqd(t)
	for _, tr := range []string{"udp", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "bench", "--transport", tr, "--mode", "rtt", "--count", "300", "--size", "64", "--out", dir).Output()
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, out)
			}
			line := strings.TrimSpace(string(out))
			for _, hop := range []string{"node_send", "to_seq", "seq", "to_node", "node_recv"} {
				for _, q := range []string{"_p50_us=", "_p99_us="} {
					if !strings.Contains(line, " "+hop+q) {
						t.Errorf("line lacks %s%s: %s", hop, q, line)
					}
				}
			}
			if !strings.Contains(line, "hop_samples=300") || strings.Contains(line, "hop_skipped") {
				t.Errorf("want all 300 samples with every hop: %s", line)
			}
			csv, err := os.ReadFile(filepath.Join(dir, tr+"_rtt_hops.csv"))
			if err != nil {
				t.Fatal(err)
			}
			if rows := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(rows) != 6 || !strings.HasPrefix(rows[1], "node_send,300,") {
				t.Errorf("%s_rtt_hops.csv:\n%s", tr, csv)
			}
		})
	}
}

// TestCLI_BenchThreeSequencers: `seqd bench --sequencers 3` runs the
// bench with one sequencer and with a Raft group of three member
// processes, and gives the group's figure as a ratio of the single one's,
// for tput and for rtt in both delivery modes, with the count of
// primaries during the group's run (epochs=N: more than 1 means the
// figures include failovers); the nodes verify each stream.
func TestCLI_BenchThreeSequencers(t *testing.T) {
	bin := seqd(t)
	for _, c := range []struct{ mode, delivery, count, ratio string }{
		{"tput", "safe", "60000", "rate_ratio="},
		{"rtt", "safe", "500", "p50_ratio="},
		{"rtt", "fast", "500", "p50_ratio="},
	} {
		t.Run(c.mode+"/"+c.delivery, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "bench", "--transport", "udp", "--sequencers", "3", "--mode", c.mode, "--delivery", c.delivery, "--count", c.count).CombinedOutput()
			s := string(out)
			if err != nil || !strings.Contains(s, "sequencers=1 delivery="+c.delivery+"\n") || !strings.Contains(s, "sequencers=3 delivery="+c.delivery+"\n") ||
				!regexp.MustCompile(` epochs=[1-9][0-9]* .*sequencers=3 delivery=`).MatchString(s) ||
				!strings.Contains(s, "sequencers=3 delivery="+c.delivery+" vs_1_sequencer "+c.ratio) {
				t.Fatalf("bench --sequencers 3: %v\n%s", err, tailOf(s, 4000))
			}
			t.Logf("%s", s[strings.Index(s, "bench transport="):])
		})
	}
}
