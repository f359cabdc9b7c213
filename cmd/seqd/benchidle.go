package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// benchIdle runs `seqd bench --mode idle`: a sequencer, a `seqd tail` and a
// read-only `seqd node` (waiting for messages that never come), all idle (the stream carries heartbeats only), for
// o.idleFor, and prints the share of one core each used and the
// sequencer's resident memory. CPU time comes from the scheduler's own
// account of each thread (/proc/PID/task/*/schedstat, in nanoseconds), not
// from the 100 Hz tick sampling that ps and top show: a process that wakes
// a hundred times a second for a few microseconds is over- or
// under-counted by the ticks, depending on how its wake-ups fall.
func benchIdle(ctx context.Context, o benchOptions, set *procSet, seq *proc, netArgs []string) (string, error) {
	tail, err := set.start(ctx, "tail", true, append([]string{"tail"}, netArgs...)...)
	if err != nil {
		return "", err
	}
	defer tail.stop()
	nd, err := set.start(ctx, "node", true, append(append([]string{"node"}, netArgs...), "--read-only", "--expect", "1000000000", "--node.idle-spin", o.spin.String())...)
	if err != nil {
		return "", err
	}
	defer nd.stop()
	procs := []*proc{seq, tail, nd}
	// Start-up (joins, the first heartbeats, the runtime's own warm-up)
	// is not idle.
	if err := sleepOrDied(ctx, set, 2*time.Second); err != nil {
		return "", err
	}
	before := make([]int64, len(procs))
	for i, p := range procs {
		if before[i], err = cpuNs(p.cmd.Process.Pid); err != nil {
			return "", err
		}
	}
	start := time.Now()
	if err := sleepOrDied(ctx, set, o.idleFor); err != nil {
		return "", err
	}
	elapsed := time.Since(start)
	fields := []string{fmt.Sprintf("bench transport=%s mode=idle seconds=%.0f", o.transport, elapsed.Seconds())}
	for i, p := range procs {
		after, err := cpuNs(p.cmd.Process.Pid)
		if err != nil {
			return "", err
		}
		fields = append(fields, fmt.Sprintf("%s_cpu_pct=%.2f", p.name, 100*float64(after-before[i])/float64(elapsed.Nanoseconds())))
	}
	if rss, err := rssKiB(seq.cmd.Process.Pid); err == nil {
		fields = append(fields, fmt.Sprintf("sequencer_rss_mib=%.1f", float64(rss)/1024))
	}
	return strings.Join(fields, " "), nil
}

// sleepOrDied waits d, failing at once when a child dies unasked.
func sleepOrDied(ctx context.Context, set *procSet, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case p := <-set.died:
		set.died <- p
		return p.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cpuNs is the CPU time, in ns, that every thread of process pid has run.
func cpuNs(pid int) (int64, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(paths) == 0 {
		return 0, fmt.Errorf("bench: no schedstat for pid %d (Linux only): %v", pid, err)
	}
	var total int64
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended between Glob and here
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: %s: %w", path, err)
		}
		total += ns
	}
	return total, nil
}

// rssKiB is process pid's resident set, in KiB.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("bench: no VmRSS for pid %d", pid)
}
