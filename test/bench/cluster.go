package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// startBenchCluster starts three `seqd sequencer --cluster` members on
// netArgs (udp multicast, each with its own directory) and returns the
// first to become primary, once it sequences, a function that stops all
// three and removes their directories, and the count of primaries the
// members announced so far (1 unless the group failed over: a loaded
// machine's starved leader loses its lease, see --timeouts). extra goes
// to each member's command line (--timeouts).
func startBenchCluster(ctx context.Context, set *procSet, netArgs []string, spin time.Duration, extra ...string) (*proc, func(), *atomic.Int64, error) {
	dir, err := os.MkdirTemp("", "seqd-bench-cluster-")
	if err != nil {
		return nil, nil, nil, err
	}
	addrs, err := freeAddrs(9)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", i+1, addrs[3*i], addrs[3*i+1], addrs[3*i+2]))
	}
	var members []*proc
	stopAll := func() {
		for _, m := range members {
			m.stop()
		}
		os.RemoveAll(dir)
	}
	for i := 1; i <= 3; i++ {
		args := append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(i), "--dir", filepath.Join(dir, fmt.Sprint(i)),
			"--peers", strings.Join(peers, ","), "--sequencer.idle-spin", spin.String()}, netArgs...)
		args = append(args, extra...)
		m, err := set.start(ctx, fmt.Sprintf("sequencer-%d", i), true, args...)
		if err != nil {
			stopAll()
			return nil, nil, nil, err
		}
		m.admin = addrs[3*(i-1)+1]
		members = append(members, m)
	}
	// The first member to print its primary line sequences: wait for the
	// line on every member's output at once. Every member's output is
	// drained for the cluster's life (a member must never block on a full
	// pipe), counting the primaries announced.
	// Once the bench stops the first primary (at the end of a run, to
	// read its stopped line) the survivors elect another at once (the
	// death watch): that primary is the bench's shutdown, not a failover
	// during the run, and is not counted.
	found := make(chan *proc, 3)
	primaries := new(atomic.Int64)
	var first atomic.Pointer[proc]
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, m := range members {
		go func() {
			for l := range m.lines {
				if !strings.HasPrefix(l, "sequencer: primary ") {
					continue
				}
				if f := first.Load(); f != nil && f.stopping.Load() {
					continue
				}
				if primaries.Add(1) == 1 {
					first.Store(m)
					found <- m
				}
			}
		}()
	}
	select {
	case p := <-found:
		return p, stopAll, primaries, nil
	case d := <-set.died:
		stopAll()
		return nil, nil, nil, d.failure()
	case <-wctx.Done():
		stopAll()
		return nil, nil, nil, fmt.Errorf("bench: no cluster member became primary within 30s")
	}
}

// benchCompareCluster runs the bench with one sequencer, then with a Raft
// group of three, and prints both lines and the ratios of the group's
// figures to the single sequencer's (tput: rate; rtt: p50 and p99).
func benchCompareCluster(ctx context.Context, o Config, outDir string) error {
	one := o
	one.Sequencers = 1
	l1, err := benchRun(ctx, one, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s sequencers=1 delivery=%s\n", l1, o.Delivery)
	l3, err := benchRun(ctx, o, outDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s sequencers=3 delivery=%s\n", l3, o.Delivery)
	if n, err := field(l3, "epochs"); err == nil && n > 1 {
		fmt.Fprintf(os.Stderr, "bench: the group changed primary %d times during the run: its figures include the failovers (on a loaded machine use --timeouts test)\n", int(n)-1)
	}
	keys := []string{"rate"}
	if o.Mode == "rtt" {
		keys = []string{"p50_us", "p99_us"}
	}
	var ratios []string
	for _, k := range keys {
		a, err := field(l1, k)
		if err != nil {
			return err
		}
		b, err := field(l3, k)
		if err != nil {
			return err
		}
		if a > 0 {
			ratios = append(ratios, fmt.Sprintf("%s_ratio=%.2f", strings.TrimSuffix(k, "_us"), b/a))
		}
	}
	fmt.Fprintf(o.Out, "bench transport=%s mode=%s sequencers=3 delivery=%s vs_1_sequencer %s\n", o.Transport, o.Mode, o.Delivery, strings.Join(ratios, " "))
	return nil
}
