package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// startBenchCluster starts three `seqd sequencer --cluster` members on
// netArgs (udp multicast, each with its own directory) and returns the
// first to become primary, once it sequences, and a function that stops
// all three and removes their directories. extra goes to each member's
// command line (--timeouts).
func startBenchCluster(ctx context.Context, set *procSet, netArgs []string, spin time.Duration, extra ...string) (*proc, func(), error) {
	dir, err := os.MkdirTemp("", "seqd-bench-cluster-")
	if err != nil {
		return nil, nil, err
	}
	addrs, err := freeAddrs(9)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
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
			return nil, nil, err
		}
		m.admin = addrs[3*(i-1)+1]
		members = append(members, m)
	}
	// The first member to print its primary line sequences: wait for the
	// line on every member's output at once.
	found := make(chan *proc, 3)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, m := range members {
		go func() {
			for {
				select {
				case l, ok := <-m.lines:
					if !ok {
						return
					}
					if strings.HasPrefix(l, "sequencer: primary ") {
						found <- m
						// Keep draining so that the member never blocks
						// on a full pipe.
						go func() {
							for range m.lines {
							}
						}()
						return
					}
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	select {
	case p := <-found:
		return p, stopAll, nil
	case d := <-set.died:
		stopAll()
		return nil, nil, d.failure()
	case <-wctx.Done():
		stopAll()
		return nil, nil, fmt.Errorf("bench: no cluster member became primary within 30s")
	}
}

// benchCompareCluster runs the bench with one sequencer, then with a Raft
// group of three, and prints both lines and the ratios of the group's
// figures to the single sequencer's (tput: rate; rtt: p50 and p99).
func benchCompareCluster(ctx context.Context, o benchOptions, outDir string) error {
	one := o
	one.sequencers = 1
	l1, err := benchRun(ctx, one, "")
	if err != nil {
		return err
	}
	fmt.Printf("%s sequencers=1 delivery=%s\n", l1, o.delivery)
	l3, err := benchRun(ctx, o, outDir)
	if err != nil {
		return err
	}
	fmt.Printf("%s sequencers=3 delivery=%s\n", l3, o.delivery)
	keys := []string{"rate"}
	if o.mode == "rtt" {
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
	fmt.Printf("bench transport=%s mode=%s sequencers=3 delivery=%s vs_1_sequencer %s\n", o.transport, o.mode, o.delivery, strings.Join(ratios, " "))
	return nil
}
