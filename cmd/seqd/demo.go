package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run three sequencers in a Raft group, a replayer and nodes in one process over UDP multicast on loopback, kill the primary midway, and check what the nodes delivered",
		Description: `With --sequencers 3 (the default): a Raft group of three sequencers, each
with its standby and fetch server, a replayer (the nodes' repair source
once the ring evicted) and --nodes sending nodes, over real sockets on
loopback; once a third of the commands are acknowledged the primary is
killed; a standby takes over in the next epoch. At the end the replayer's
directory is replayed as an archive and compared with the nodes' stream.
Ends with
  demo: ok sequenced=N delivered=N nodes=K failovers=1 lost=0 dup=0 diverged=0
With --sequencers 1: one sequencer over a lossy in-memory network (--loss).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sequencers", Value: 3, Usage: "3: a Raft group with a failover; 1: one sequencer over a lossy in-memory network"},
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "sending nodes"},
			&cli.IntFlag{Name: "count", Value: 20000, Usage: "commands per node"},
			&cli.StringFlag{Name: "timeouts", Value: "lan", Usage: "with --sequencers 3: the raft timing profile (lan, wan, test)"},
			&cli.IntFlag{Name: "rate", Value: 5000, Usage: "with --sequencers 3: commands per second per node (0: as fast as the window allows)"},
			&cli.Float64Flag{Name: "loss", Value: 0.05, Usage: "injected loss per frame"},
			&cli.Uint64Flag{Name: "seed", Value: 7, Usage: "seed of the injected faults"},
		},
		Action: func(c *cli.Context) error {
			switch c.Int("sequencers") {
			case 3:
				return runClusterDemo(c.Context, c.Int("nodes"), c.Int("count"), c.Int("rate"), c.String("timeouts"))
			case 1:
			default:
				return keyError("sequencers", fmt.Sprint(c.Int("sequencers")), "1 or 3")
			}
			return runDemo(c.Context, c.Int("nodes"), c.Int("count"), fault.Config{Loss: c.Float64("loss"), Dup: 0.01, Reorder: 0.01, Seed: c.Uint64("seed")})
		},
	}
}

// demoNode checks its own delivered stream as it goes: no gap, no repeat,
// each sender's commands once and in order; it hashes what it delivered so
// that the streams of all nodes can be compared at the end.
type demoNode struct {
	name    string
	n       *node.Node
	mu      sync.Mutex
	last    uint64
	lost    uint64
	dup     uint64
	acked   int
	lastCmd map[wire.Account]uint64
	digest  uint64
}

func (d *demoNode) OnMessage(m *node.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case m.Seq <= d.last:
		d.dup++
		return
	case m.Seq > d.last+1:
		d.lost += m.Seq - d.last - 1
	}
	d.last = m.Seq
	h := fnv.New64a()
	var b [24]byte
	le64(b[0:], d.digest)
	le64(b[8:], m.Seq)
	le64(b[16:], uint64(m.Account))
	h.Write(b[:])
	h.Write(m.Payload)
	d.digest = h.Sum64()
	if m.Internal() {
		return
	}
	if m.CmdSeq != d.lastCmd[m.Account]+1 {
		d.dup++
	}
	d.lastCmd[m.Account] = m.CmdSeq
	if m.Mine() {
		d.acked++
	}
}

func le64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

func runDemo(ctx context.Context, nodes, count int, faults fault.Config) error {
	net, err := mem.NewNetwork(mem.Config{Faults: faults})
	if err != nil {
		return err
	}
	fmt.Printf("demo: 1 sequencer, %d nodes, %d commands each, faults %s\n", nodes, count, faults)
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
		d := &demoNode{name: fmt.Sprintf("DEMO%d", i), lastCmd: map[wire.Account]uint64{}}
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
		go func() {
			defer wg.Done()
			if err := d.n.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				nodeErr <- fmt.Errorf("%s: %w", d.name, err)
			}
		}()
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
		lost += d.lost
		dup += d.dup
		if d.digest != ds[0].digest {
			diverged++
		}
	}
	st := core.Stats()
	fmt.Printf("demo: sequencer stats: %+v\n", st)
	fmt.Printf("demo: %d commands in %v\n", nodes*count, elapsed.Round(time.Millisecond))
	status := "ok"
	if lost != 0 || dup != 0 || diverged != 0 {
		status = "FAILED"
	}
	fmt.Printf("demo: %s sequenced=%d delivered=%d nodes=%d lost=%d dup=%d diverged=%d\n",
		status, sequenced, ds[0].last, nodes, lost, dup, diverged)
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
		l := d.last
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
		s += fmt.Sprintf("%s{delivered=%d acked=%d} ", d.name, d.last, d.acked)
		d.mu.Unlock()
	}
	return s
}
