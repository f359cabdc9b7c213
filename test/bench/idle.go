package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/test/proc"
)

// benchIdle runs `seqd bench --mode idle`: a sequencer (with
// --sequencers 3, the three members of a cluster: the primary and two
// standbys), a `seqd tail` and a read-only `seqd node` (waiting for
// messages that never come), all idle (the stream carries heartbeats
// only), for o.IdleFor, and prints the share of one core each used, how
// often each was woken (scheduled onto a CPU) per second, and the
// sequencer's (the primary's) resident memory. CPU time comes from the
// scheduler's own account of each thread (/proc/PID/task/*/schedstat, in
// nanoseconds), not from the 100 Hz tick sampling that ps and top show: a
// process that wakes a hundred times a second for a few microseconds is
// over- or under-counted by the ticks, depending on how its wake-ups fall.
func benchIdle(ctx context.Context, o Config, set *children, seq *proc.Proc, group *benchCluster, netArgs []string) (string, error) {
	// With a cluster, every member is measured under its role's name.
	type measured struct {
		name string
		p    *proc.Proc
	}
	procs := []measured{{"sequencer", seq}}
	var members []*proc.Proc
	if group != nil {
		members = group.members
		procs = procs[:0]
		for _, p := range members {
			procs = append(procs, measured{p.Name(), p})
		}
	}
	tail, err := set.start(ctx, "tail", true, append([]string{"tail"}, netArgs...)...)
	if err != nil {
		return "", err
	}
	defer tail.Stop()
	nd, err := set.start(ctx, "node", true, append(append([]string{"node"}, netArgs...), "--read-only", "--expect", "1000000000", "--node.idle-spin", o.Spin.String())...)
	if err != nil {
		return "", err
	}
	defer nd.Stop()
	procs = append(procs, measured{"tail", tail}, measured{"node", nd})
	// Start-up (joins, the first heartbeats, the runtime's own warm-up)
	// is not idle.
	if err := sleepOrDied(ctx, set, 2*time.Second); err != nil {
		return "", err
	}
	epoch0 := uint64(0)
	if members != nil {
		// An epoch change under a loaded machine's start-up is not idle
		// either: measure a settled group.
		if epoch0, err = settledEpoch(ctx, set, group); err != nil {
			return "", err
		}
	}
	before := make([]schedStat, len(procs))
	for i, p := range procs {
		if before[i], err = readSchedStat(p.p.Pid()); err != nil {
			return "", err
		}
	}
	start := time.Now()
	if err := sleepOrDied(ctx, set, o.IdleFor); err != nil {
		return "", err
	}
	elapsed := time.Since(start)
	head := fmt.Sprintf("bench transport=%s mode=idle seconds=%.0f", o.Transport, elapsed.Seconds())
	if members != nil {
		// Each member is named by its role at the end; an epoch change
		// during the measurement is said (its figures mix the roles).
		head += fmt.Sprintf(" sequencers=3 timeouts=%s", o.Timeouts)
		standbys := 0
		for i := range members {
			st, err := ops.FetchStatus(ctx, group.admins[i])
			switch {
			case err != nil:
				procs[i].name = "member" + strconv.Itoa(i+1)
			case st.Role == cluster.RolePrimary.String():
				procs[i].name = "primary"
				head += fmt.Sprintf(" primary_id=%d", st.ID)
				if st.Epoch != epoch0 {
					head += fmt.Sprintf(" epoch_changed=%d..%d", epoch0, st.Epoch)
				}
			default:
				standbys++
				procs[i].name = "standby" + strconv.Itoa(standbys)
			}
		}
	}
	fields := []string{head}
	for i, p := range procs {
		after, err := readSchedStat(p.p.Pid())
		if err != nil {
			return "", err
		}
		fields = append(fields, fmt.Sprintf("%s_cpu_pct=%.2f %s_wakeups_per_s=%.0f", p.name, 100*float64(after.ns-before[i].ns)/float64(elapsed.Nanoseconds()),
			p.name, float64(after.runs-before[i].runs)/elapsed.Seconds()))
	}
	if rss, err := rssKiB(seq.Pid()); err == nil {
		fields = append(fields, fmt.Sprintf("sequencer_rss_mib=%.1f", float64(rss)/1024))
	}
	return strings.Join(fields, " "), nil
}

// settledEpoch waits until one member of a cluster is primary and every
// member reports the same epoch, and returns that epoch.
func settledEpoch(ctx context.Context, set *children, group *benchCluster) (uint64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		epoch, primaries, agreed := uint64(0), 0, true
		for i, admin := range group.admins {
			st, err := ops.FetchStatus(ctx, admin)
			if err != nil {
				agreed = false
				break
			}
			if i == 0 {
				epoch = st.Epoch
			}
			agreed = agreed && st.Epoch == epoch
			if st.Role == cluster.RolePrimary.String() {
				primaries++
			}
		}
		if agreed && primaries == 1 {
			return epoch, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: the cluster did not settle on one primary and epoch within 30s")
		}
		if err := sleepOrDied(ctx, set, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// sleepOrDied waits d, failing at once when a child dies unasked.
func sleepOrDied(ctx context.Context, set *children, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-set.Died():
		return set.Dead().Failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// schedStat is the scheduler's account of every thread of a process:
// the CPU time run, in ns, and how many times a thread was put on a CPU
// (each wake-up of a blocked thread is one).
type schedStat struct {
	ns, runs int64
}

// readSchedStat sums /proc/PID/task/*/schedstat (run ns, wait ns, runs)
// over the threads of process pid. A thread that ended takes its share
// with it; a Go process keeps its threads.
func readSchedStat(pid int) (schedStat, error) {
	var total schedStat
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(paths) == 0 {
		return total, fmt.Errorf("bench: no schedstat for pid %d (Linux only): %v", pid, err)
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended between Glob and here
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return total, fmt.Errorf("bench: %s: %w", path, err)
		}
		runs, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return total, fmt.Errorf("bench: %s: %w", path, err)
		}
		total.ns += ns
		total.runs += runs
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
