package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure end-to-end throughput or round trip, verifying the received stream",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "transport", Value: "mem", Usage: "mem | udp | tcp"},
			&cli.StringFlag{Name: "mode", Value: "tput", Usage: "tput | rtt | baseline | rewind (a replayer holds --count messages; one node rewinds them over TCP; --transport defaults to tcp) | idle (a sequencer, a tail and a read-only node with no traffic for --idle-for: the share of a core each uses)"},
			&cli.DurationFlag{Name: "idle-for", Value: 20 * time.Second, Usage: "--mode idle: how long the processes are measured"},
			&cli.IntFlag{Name: "size", Value: 256, Usage: "payload bytes per message"},
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "sending nodes"},
			&cli.IntFlag{Name: "count", Value: 3_000_000, Usage: "messages in all"},
			&cli.BoolFlag{Name: "batch", Usage: "let nodes put several commands in one frame (the sequencer always batches)"},
			&cli.DurationFlag{Name: "spin", Usage: "processes poll without blocking this long after each frame (sequencer.idle-spin, node.idle-spin)"},
			&cli.StringFlag{Name: "out", Usage: "write latency histograms (CSV and PNG) into this directory"},
			&cli.IntFlag{Name: "sequencers", Value: 1, Usage: "1 | 3: with 3, the bench runs with one sequencer, then with a Raft group of three seqd sequencer --cluster processes (udp only), and gives the group's figure as a ratio of the single one's; with --mode idle, only the group runs and each member's share of a core is printed"},
			&cli.StringFlag{Name: "timeouts", Value: "lan", Usage: "with --sequencers 3: the members' raft timing profile (lan, wan, test)"},
			&cli.StringFlag{Name: "delivery", Value: "safe", Usage: "safe | fast: the nodes' delivery mode (node.mode)"},
		},
		Action: func(c *cli.Context) error {
			opt := benchOptions{
				transport:  c.String("transport"),
				mode:       c.String("mode"),
				size:       c.Int("size"),
				nodes:      c.Int("nodes"),
				count:      c.Int("count"),
				batch:      c.Bool("batch"),
				spin:       c.Duration("spin"),
				sequencers: c.Int("sequencers"),
				delivery:   c.String("delivery"),
				idleFor:    c.Duration("idle-for"),
				timeouts:   c.String("timeouts"),
			}
			if opt.mode == "rewind" && !c.IsSet("transport") {
				opt.transport = "tcp"
			}
			if err := opt.validate(); err != nil {
				return err
			}
			if opt.mode == "baseline" {
				return runBaseline(c.Context, opt.size, opt.count, opt.batch, c.String("out"))
			}
			switch opt.transport {
			case "mem":
				if opt.mode != "tput" {
					return fmt.Errorf("bench: --mode %s needs a real transport (udp or tcp)", opt.mode)
				}
				return benchMem(opt)
			case "udp", "tcp":
				err := benchProcesses(c.Context, opt, c.String("out"))
				if err != nil && stopsignal.Received() != nil {
					// The children were killed because the bench was
					// asked to stop: say that, not how they died.
					return fmt.Errorf("bench: interrupted by %v", stopsignal.Received())
				}
				return err
			}
			return fmt.Errorf("bench: --transport %q not supported yet (want mem, udp or tcp)", opt.transport)
		},
	}
}

type benchOptions struct {
	transport, mode string
	size, nodes     int
	count           int
	batch           bool
	spin            time.Duration
	sequencers      int    // 1, or 3: a Raft group compared with 1
	delivery        string // the nodes' node.mode: safe | fast
	idleFor         time.Duration
	timeouts        string // the cluster members' raft profile (--sequencers 3)
}

func (o benchOptions) validate() error {
	switch {
	case o.size < 1 || o.size > wire.MaxMessageBytes:
		return fmt.Errorf("bench: --size %d out of range (1..%d)", o.size, wire.MaxMessageBytes)
	case o.nodes < 1 || o.nodes > 64:
		return fmt.Errorf("bench: --nodes %d out of range (1..64)", o.nodes)
	case o.count < o.nodes:
		return fmt.Errorf("bench: --count %d must be at least --nodes", o.count)
	}
	switch o.mode {
	case "tput", "rtt", "baseline", "rewind":
	case "idle":
		if o.idleFor <= 0 {
			return fmt.Errorf("bench: --idle-for %v must be positive", o.idleFor)
		}
	default:
		return fmt.Errorf("bench: --mode %q (want tput, rtt, baseline, rewind or idle)", o.mode)
	}
	switch {
	case o.sequencers != 1 && o.sequencers != 3:
		return fmt.Errorf("bench: --sequencers %d (want 1 or 3)", o.sequencers)
	case o.delivery != "safe" && o.delivery != "fast":
		return fmt.Errorf("bench: --delivery %q (want safe or fast)", o.delivery)
	case o.sequencers == 3 && (o.transport != "udp" || (o.mode != "tput" && o.mode != "rtt" && o.mode != "idle")):
		return fmt.Errorf("bench: --sequencers 3 runs with --transport udp and --mode tput, rtt or idle (a cluster's stream is udp multicast)")
	case o.sequencers == 3 && cluster.Profiles[o.timeouts] == nil:
		return fmt.Errorf("bench: --timeouts %q (want lan, wan or test)", o.timeouts)
	}
	return nil
}

// benchReceiver verifies the stream it delivers: dense seqs and each
// sender's commands once, in order.
type benchReceiver struct {
	last     uint64
	msgs     int
	lastCmd  [64]uint64
	accounts [64]wire.Account
	err      error
}

func (r *benchReceiver) OnMessage(m *node.Message) {
	if m.Seq != r.last+1 && r.err == nil {
		r.err = fmt.Errorf("bench: receiver got seq %d after %d", m.Seq, r.last)
	}
	r.last = m.Seq
	if m.Internal() {
		return
	}
	for i, a := range r.accounts {
		if a == m.Account {
			if m.CmdSeq != r.lastCmd[i]+1 && r.err == nil {
				r.err = fmt.Errorf("bench: command %d of %v after %d", m.CmdSeq, a, r.lastCmd[i])
			}
			r.lastCmd[i] = m.CmdSeq
			r.msgs++
			return
		}
	}
	if r.err == nil {
		r.err = fmt.Errorf("bench: message from unknown account %v", m.Account)
	}
}

type benchSender struct{}

func (benchSender) OnMessage(*node.Message) {}

// clientOut hands a node core's frames to its mem client.
type clientOut struct{ c transport.Client }

func (o clientOut) Send(f []byte) { _ = o.c.Send(f) }

// memFrameBytes is the largest frame the bench puts on the mem network.
const memFrameBytes = 65507

// benchMem runs the sequencer, the senders and one receiving node on one
// goroutine over the mem transport: the cost of the protocol itself,
// without system calls.
func benchMem(o benchOptions) error {
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return err
	}
	srv := net.Server()
	scfg := sequencer.DefaultConfig()
	scfg.Session = 1
	scfg.Epoch = 1
	// The mem transport's "path MTU" is its frame limit: batch up to it,
	// as the udp bench batches up to the interface MTU.
	scfg.MaxPacketBytes = memFrameBytes
	scfg.RingBytes = 256 << 20
	seq, err := sequencer.NewSinkShell(scfg, sequencer.ServerSink{Server: srv})
	if err != nil {
		return err
	}
	// One clock reading per round, shared by every frame of the round.
	clock := sequencer.SystemClock()
	snow := clock()
	onSrv := func(f []byte, from transport.Peer) { _ = seq.Step(snow, f, from) }

	recv := &benchReceiver{}
	type peer struct {
		client  transport.Client
		core    *node.Core
		handler transport.Handler
	}
	var peers []peer
	now := time.Now().UnixNano()
	for i := 0; i <= o.nodes; i++ {
		cfg := node.DefaultConfig()
		cfg.Account = fmt.Sprintf("B%d", i)
		cfg.Rewind = true // the receiver checks the stream from seq 1
		cfg.Incarnation = 1
		var h node.Handler = benchSender{}
		if i == o.nodes {
			cfg.Account = "RECV"
			cfg.ReadOnly = true
			h = recv
		} else {
			recv.accounts[i] = wire.MustAccount(cfg.Account)
		}
		cfg.Window = 4096
		cfg.MaxPacketBytes = memFrameBytes
		if one := wire.CommandHeaderBytes + wire.CommandRecordBytes + o.size; !o.batch && one <= memFrameBytes {
			cfg.MaxPacketBytes = one
		}
		cl := net.Client()
		core, err := node.NewCore(cfg, h, clientOut{cl})
		if err != nil {
			return err
		}
		p := peer{client: cl, core: core}
		p.handler = func(f []byte, _ transport.Peer) { _ = core.Step(now, f) }
		peers = append(peers, p)
	}
	payload := make([]byte, o.size)
	perNode := o.count / o.nodes
	total := perNode * o.nodes
	sent := make([]int, o.nodes)

	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for rounds := 0; recv.msgs < total; rounds++ {
		snow = clock()
		now = snow.Wall
		for i := 0; i < o.nodes; i++ {
			c := peers[i].core
			for k := 0; k < 64 && sent[i] < perNode; k++ {
				if _, err := c.Send(now, payload); err != nil {
					if errors.Is(err, node.ErrWindowFull) {
						break
					}
					return err
				}
				sent[i]++
			}
			c.Flush(now)
		}
		if _, err := srv.Poll(onSrv, 0); err != nil {
			return err
		}
		seq.Flush(snow)
		for i := range peers {
			if _, err := peers[i].client.Poll(peers[i].handler, 0); err != nil {
				return err
			}
			if rounds%64 == 0 {
				peers[i].core.Tick(now)
			}
		}
		if recv.err != nil {
			return recv.err
		}
		if rounds%1024 == 0 && time.Now().After(deadline) {
			return fmt.Errorf("bench: stalled: received %d of %d", recv.msgs, total)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	allocs := float64(ms1.Mallocs-ms0.Mallocs) / float64(total)
	fmt.Printf("bench transport=mem mode=tput size=%d nodes=%d msgs=%d rate=%.0f msg/s allocs_per_msg=%.4f\n",
		o.size, o.nodes, total, float64(total)/elapsed.Seconds(), allocs)
	return nil
}
