package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/test/bench"
)

func benchCommand() *cli.Command {
	d := bench.DefaultConfig()
	return &cli.Command{
		Name:  "bench",
		Usage: "measure end-to-end throughput or round trip, verifying the received stream",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "transport", Value: d.Transport, Usage: "mem | udp | tcp"},
			&cli.StringFlag{Name: "mode", Value: d.Mode, Usage: "tput | rtt | baseline | rewind (a replayer holds --count messages; one node rewinds them over TCP; --transport defaults to tcp) | idle (a sequencer, a tail and a read-only node with no traffic for --idle-for: the share of a core each uses) | bridge (two sites joined by a seqd bridge pair: added one-way latency and the far site's rate as a ratio of the origin's)"},
			&cli.DurationFlag{Name: "idle-for", Value: d.IdleFor, Usage: "--mode idle: how long the processes are measured"},
			&cli.IntFlag{Name: "size", Value: d.SizeBytes, Usage: "payload bytes per message"},
			&cli.IntFlag{Name: "nodes", Value: d.Nodes, Usage: "sending nodes"},
			&cli.IntFlag{Name: "count", Value: d.Count, Usage: "messages in all"},
			&cli.BoolFlag{Name: "batch", Usage: "let nodes put several commands in one frame (the sequencer always batches)"},
			&cli.DurationFlag{Name: "spin", Usage: "processes poll without blocking this long after each frame (sequencer.idle-spin, node.idle-spin)"},
			&cli.StringFlag{Name: "out", Usage: "write latency histograms (CSV and PNG) into this directory"},
			&cli.IntFlag{Name: "sequencers", Value: d.Sequencers, Usage: "1 | 3: with 3, the bench runs with one sequencer, then with a Raft group of three seqd sequencer --cluster processes (udp only), and gives the group's figure as a ratio of the single one's; with --mode idle, only the group runs and each member's share of a core is printed"},
			&cli.StringFlag{Name: "timeouts", Value: d.Timeouts, Usage: "with --sequencers 3: the members' raft timing profile (lan, wan, test)"},
			&cli.StringFlag{Name: "delivery", Value: d.Delivery, Usage: "safe | fast: the nodes' delivery mode (node.mode)"},
			&cli.StringFlag{Name: "faults", Usage: "--mode bridge: seeded faults on the bridge's UDP channel where the receiving end reads it, e.g. loss=0.05,seed=9 (the TCP channel stays healthy)"},
			&cli.BoolFlag{Name: "auth", Usage: "run every process with authenticated frames (keys drawn for the run; udp only)"},
			&cli.StringFlag{Name: "tls", Value: "off", Usage: "off | on | compare: with --transport tcp, every process holds a certificate of a throwaway CA (mutual TLS 1.3 on the stream and commands); compare runs without, then with, and prints the ratios"},
		},
		Action: func(c *cli.Context) error {
			cfg := bench.Config{
				Transport:  c.String("transport"),
				Mode:       c.String("mode"),
				IdleFor:    c.Duration("idle-for"),
				SizeBytes:  c.Int("size"),
				Nodes:      c.Int("nodes"),
				Count:      c.Int("count"),
				Batch:      c.Bool("batch"),
				Spin:       c.Duration("spin"),
				OutDir:     c.String("out"),
				Sequencers: c.Int("sequencers"),
				Timeouts:   c.String("timeouts"),
				Delivery:   c.String("delivery"),
				Faults:     c.String("faults"),
				Auth:       c.Bool("auth"),
				TLS:        c.String("tls"),
			}
			if cfg.Mode == "rewind" && !c.IsSet("transport") {
				cfg.Transport = "tcp"
			}
			err := bench.Run(c.Context, cfg)
			if err != nil && cfg.Mode != "baseline" && (cfg.Transport == "udp" || cfg.Transport == "tcp") && stopsignal.Received() != nil {
				// The children were killed because the bench was
				// asked to stop: say that, not how they died.
				return fmt.Errorf("bench: interrupted by %v", stopsignal.Received())
			}
			return err
		},
	}
}

// benchPeerCommand is the child side of `bench --mode baseline`. It is
// hidden: only the bench runs it.
func benchPeerCommand() *cli.Command {
	d := bench.DefaultPeerConfig()
	return &cli.Command{
		Name:   "bench-peer",
		Usage:  "the other process of bench --mode baseline (echo or sink UDP on loopback)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role", Required: true, Usage: "echo | sink"},
			&cli.StringFlag{Name: "addr", Value: d.Addr, Usage: "UDP address to listen on"},
			&cli.IntFlag{Name: "size", Value: d.SizeBytes, Usage: "bytes per message (the sink counts datagram bytes / size)"},
		},
		Action: func(c *cli.Context) error {
			return bench.RunPeer(bench.PeerConfig{Role: c.String("role"), Addr: c.String("addr"), SizeBytes: c.Int("size")}, os.Stdin, os.Stdout)
		},
	}
}
