package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/test/proc"
)

// benchCluster is the Raft group of a bench run: three `seqd sequencer
// --cluster` members on one host, each with its own directory.
type benchCluster struct {
	members []*proc.Proc
	admins  []string   // members[i]'s control endpoint
	primary *proc.Proc // the first member to become primary
	// primaries counts the primaries the members announced during the
	// run: 1 unless the group failed over (a loaded machine's starved
	// leader loses its lease, see --timeouts).
	primaries atomic.Int64
	// shutdown is set once the bench stops the first primary (at the end
	// of a run, to read its stopped line) or the group: the survivors
	// then elect another at once (the death watch), which is the bench's
	// shutdown, not a failover during the run, and is not counted.
	shutdown atomic.Bool
	dir      string
	// endWatch ends the goroutines that watch the members' lines.
	endWatch context.CancelFunc
}

// stopPrimary stops the first primary; later primaries are not counted.
func (c *benchCluster) stopPrimary() {
	c.shutdown.Store(true)
	c.primary.Stop()
}

// stop stops every member and removes their directories.
func (c *benchCluster) stop() {
	c.shutdown.Store(true)
	c.endWatch()
	for _, m := range c.members {
		m.Stop()
	}
	os.RemoveAll(c.dir)
}

// primaryLine is what a member prints when it becomes primary.
var primaryLine = regexp.MustCompile(`^sequencer: primary `)

// startBenchCluster starts three `seqd sequencer --cluster` members on
// netArgs (udp multicast) and returns the group once its first primary
// sequences. extra goes to each member's command line (--timeouts).
func startBenchCluster(ctx context.Context, set *children, netArgs []string, spin time.Duration, extra ...string) (*benchCluster, error) {
	dir, err := os.MkdirTemp("", "seqd-bench-cluster-")
	if err != nil {
		return nil, err
	}
	addrs, err := freeport.Addrs(9)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", i+1, addrs[3*i], addrs[3*i+1], addrs[3*i+2]))
	}
	watchCtx, endWatch := context.WithCancel(ctx)
	c := &benchCluster{dir: dir, endWatch: endWatch}
	for i := 1; i <= 3; i++ {
		args := append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(i), "--dir", filepath.Join(dir, fmt.Sprint(i)),
			"--peers", strings.Join(peers, ","), "--sequencer.idle-spin", spin.String()}, netArgs...)
		args = append(args, extra...)
		m, err := set.start(ctx, fmt.Sprintf("sequencer-%d", i), true, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, m)
		c.admins = append(c.admins, addrs[3*(i-1)+1])
	}
	// The first member to print its primary line sequences: watch every
	// member's output at once, for the group's life, counting the
	// primaries announced.
	found := make(chan *proc.Proc, 3)
	for _, m := range c.members {
		go c.watch(watchCtx, m, found)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case p := <-found:
		c.primary = p
		return c, nil
	case <-set.Died():
		c.stop()
		return nil, set.Dead().Failure()
	case <-wctx.Done():
		c.stop()
		return nil, fmt.Errorf("bench: no cluster member became primary within 30s")
	}
}

// watch counts m's primary lines until m exits or ctx ends; the first
// primary of the group goes to found.
func (c *benchCluster) watch(ctx context.Context, m *proc.Proc, found chan<- *proc.Proc) {
	for from := 0; ; {
		if _, err := m.Await(ctx, primaryLine, from, "primary line"); err != nil {
			return
		}
		_, at := m.Find(primaryLine, from)
		from = at + 1
		if c.shutdown.Load() {
			continue
		}
		if c.primaries.Add(1) == 1 {
			found <- m
		}
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
	keys := []string{"rate", "cpu_s_per_million"}
	if o.Mode == "rtt" {
		keys = []string{"p50_us", "p99_us", "cpu_s_per_million"}
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
			ratios = append(ratios, fmt.Sprintf("%s_ratio=%.2f", strings.TrimSuffix(strings.TrimSuffix(k, "_us"), "_s_per_million"), b/a))
		}
	}
	fmt.Fprintf(o.Out, "bench transport=%s mode=%s sequencers=3 delivery=%s vs_1_sequencer %s\n", o.Transport, o.Mode, o.Delivery, strings.Join(ratios, " "))
	return nil
}
