package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/demo"
)

// `seqd demo`: flags into demo.Config (test/demo runs it).

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
A bridge pair (one TCP and one UDP channel, in process) carries the
stream to a second site's own groups, where a read-only node must deliver
the same stream (same last seq and digest). A hot-hot pair (account PAIR,
instances 1 and 2) answers every 100th command of DEMO0 from its
OnMessage; at two thirds its active instance is stopped and the partner
becomes active after the sequencers' active-timeout (250 ms): each
trigger must be answered exactly once. Ends with
  demo: ok sequenced=N delivered=N nodes=K failovers=1 lost=0 dup=0 diverged=0 failover_ms=F archived=N bridged=N pair_cmds=N pair_lost=0 pair_dup=0 takeover_ms=T
With --sequencers 1: one sequencer over a lossy in-memory network (--loss).`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sequencers", Value: demo.DefaultConfig().Sequencers, Usage: "3: a Raft group with a failover; 1: one sequencer over a lossy in-memory network"},
			&cli.IntFlag{Name: "nodes", Value: demo.DefaultConfig().Nodes, Usage: "sending nodes"},
			&cli.IntFlag{Name: "count", Value: demo.DefaultConfig().CommandsPerNode, Usage: "commands per node"},
			&cli.StringFlag{Name: "timeouts", Value: demo.DefaultConfig().Timeouts, Usage: "with --sequencers 3: the raft timing profile (lan, wan, test)"},
			&cli.IntFlag{Name: "rate", Value: demo.DefaultConfig().RatePerSecond, Usage: "with --sequencers 3: commands per second per node (0: as fast as the window allows)"},
			&cli.Float64Flag{Name: "loss", Value: demo.DefaultConfig().Faults.Loss, Usage: "injected loss per frame"},
			&cli.Uint64Flag{Name: "seed", Value: demo.DefaultConfig().Faults.Seed, Usage: "seed of the injected faults"},
		},
		Action: func(c *cli.Context) error {
			cfg := demo.DefaultConfig()
			cfg.Sequencers = c.Int("sequencers")
			if cfg.Sequencers != 1 && cfg.Sequencers != 3 {
				return options.KeyError("sequencers", fmt.Sprint(cfg.Sequencers), "1 or 3")
			}
			cfg.Nodes, cfg.CommandsPerNode, cfg.RatePerSecond, cfg.Timeouts = c.Int("nodes"), c.Int("count"), c.Int("rate"), c.String("timeouts")
			cfg.Faults.Loss, cfg.Faults.Seed = c.Float64("loss"), c.Uint64("seed")
			return demo.Run(c.Context, cfg)
		},
	}
}
