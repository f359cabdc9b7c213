package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// Config is one demo run.
type Config struct {
	// Sequencers is 3 (a Raft group with a failover, over UDP multicast
	// on loopback) or 1 (one sequencer over a lossy in-memory network).
	Sequencers int
	// Nodes is the sending nodes; CommandsPerNode what each sends.
	Nodes, CommandsPerNode int
	// Timeouts is the raft timing profile (Sequencers 3: lan, wan, test).
	Timeouts string
	// RatePerSecond paces each node (Sequencers 3; 0: as fast as the
	// window allows).
	RatePerSecond int
	// Faults are the in-memory network's (Sequencers 1).
	Faults fault.Config
	// Out receives the demo's lines (nil: os.Stdout).
	Out io.Writer
}

// DefaultConfig is `seqd demo` with no flags.
func DefaultConfig() Config {
	return Config{Sequencers: 3, Nodes: 3, CommandsPerNode: 20000, Timeouts: "lan", RatePerSecond: 5000,
		Faults: fault.Config{Loss: 0.05, Dup: 0.01, Reorder: 0.01, Seed: 7}}
}

// Run runs the demo, printing its lines on Out, and fails unless every
// node delivered the same stream (and, with three sequencers, the
// failover happened and the replayer's archive replays to it).
func Run(ctx context.Context, cfg Config) error {
	out := cfg.Out
	if out == nil {
		out = os.Stdout
	}
	switch cfg.Sequencers {
	case 3:
		return runCluster(ctx, out, cfg.Nodes, cfg.CommandsPerNode, cfg.RatePerSecond, cfg.Timeouts)
	case 1:
		return runMem(ctx, out, cfg.Nodes, cfg.CommandsPerNode, cfg.Faults)
	}
	return config.New(ErrConfig, "Sequencers", cfg.Sequencers, "1 or 3")
}

// demoNode checks its own delivered stream as it goes (test/check: no
// gap, no repeat, each sender's commands once and in order) and digests
// it, so that the streams of all nodes can be compared at the end.
type demoNode struct {
	name  string
	n     *node.Node
	mu    sync.Mutex
	check *check.Stream
	acked int
	pair  pairCheck // the hot-hot pair's commands (pair.go)
}

func newDemoNode(name string) *demoNode {
	return &demoNode{name: name, check: check.New(check.Config{Digest: true, HotHot: []wire.Account{pairAccount}})}
}

// run runs the node until ctx ends; an error that is not ctx's goes to
// errs. It marks wg done.
func (d *demoNode) run(ctx context.Context, wg *sync.WaitGroup, errs chan<- error) {
	defer wg.Done()
	if err := d.n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		errs <- fmt.Errorf("%s: %w", d.name, err)
	}
}

func (d *demoNode) OnMessage(m *node.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.check.Observe(m).Fault == check.SeqRepeat {
		return
	}
	d.pair.observe(m)
	if !m.Internal() && m.Mine() {
		d.acked++
	}
}

func runMem(ctx context.Context, out io.Writer, nodes, count int, faults fault.Config) error {
	net, err := mem.NewNetwork(mem.Config{Faults: faults})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo: 1 sequencer, %d nodes, %d commands each, faults %s\n", nodes, count, faults)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	scfg := sequencer.DefaultConfig()
	scfg.Session = uint64(time.Now().UnixNano())
	scfg.Epoch = 1
	agent, err := sequencer.NewAgent(scfg, net.Server(), sequencer.SystemClock())
	if err != nil {
		return err
	}
	core := agent.Core()
	var wg sync.WaitGroup
	seqErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Run returns only on cancellation or a transport failure.
		if err := agent.Run(ctx); !errors.Is(err, context.Canceled) {
			seqErr <- err
		}
	}()

	ds := make([]*demoNode, nodes)
	nodeErr := make(chan error, nodes)
	for i := range ds {
		d := newDemoNode(fmt.Sprintf("DEMO%d", i))
		cfg := node.DefaultConfig()
		cfg.Account = d.name
		cfg.Rewind = true // every node's digest covers the stream from seq 1
		cfg.BlockWhenFull = true
		d.n, err = node.New(cfg, d, net.Client())
		if err != nil {
			return err
		}
		ds[i] = d
		wg.Add(1)
		go d.run(ctx, &wg, nodeErr)
	}
	start := time.Now()
	for i := range ds {
		d := ds[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < count && ctx.Err() == nil; k++ {
				if _, err := d.n.SendContext(ctx, []byte(fmt.Sprintf("%s order %d", d.name, k))); err != nil {
					nodeErr <- fmt.Errorf("%s send: %w", d.name, err)
					return
				}
			}
		}()
	}

	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-nodeErr:
			cancel()
			wg.Wait()
			return err
		case err := <-seqErr:
			cancel()
			wg.Wait()
			return fmt.Errorf("sequencer stopped: %w", err)
		case <-deadline:
			cancel()
			wg.Wait()
			return fmt.Errorf("demo: no convergence after 2m: %s", demoProgress(ds))
		case <-tick.C:
		}
		if demoDone(ds, count) {
			break
		}
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()

	sequenced := core.NextSeq() - 1
	var lost, dup, diverged uint64
	for _, d := range ds {
		lost += d.check.Lost
		dup += d.check.Dup
		if d.check.Digest != ds[0].check.Digest {
			diverged++
		}
	}
	st := core.Stats()
	fmt.Fprintf(out, "demo: sequencer stats: %+v\n", st)
	fmt.Fprintf(out, "demo: %d commands in %v\n", nodes*count, elapsed.Round(time.Millisecond))
	status := "ok"
	if lost != 0 || dup != 0 || diverged != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(out, "demo: %s sequenced=%d delivered=%d nodes=%d lost=%d dup=%d diverged=%d\n",
		status, sequenced, ds[0].check.Last, nodes, lost, dup, diverged)
	if status != "ok" {
		return errors.New("demo: streams differ")
	}
	return nil
}

func demoDone(ds []*demoNode, count int) bool {
	var last uint64
	for i, d := range ds {
		d.mu.Lock()
		ok := d.acked == count
		l := d.check.Last
		d.mu.Unlock()
		if !ok {
			return false
		}
		if i == 0 {
			last = l
		} else if l != last {
			return false
		}
	}
	return true
}

func demoProgress(ds []*demoNode) string {
	s := ""
	for _, d := range ds {
		d.mu.Lock()
		s += fmt.Sprintf("%s{delivered=%d acked=%d} ", d.name, d.check.Last, d.acked)
		d.mu.Unlock()
	}
	return s
}
