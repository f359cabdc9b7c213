package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/drill"
	"github.com/seqd/seqd/wire"
)

// `seqd drill failover` and its hidden `seqd drill node`: flags into
// drill.Config and drill.NodeConfig (test/drill runs them).

func drillCommand() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "failover drills against real processes",
		Subcommands: []*cli.Command{{
			Name:  "failover",
			Usage: "fault the primary of a three-sequencer cluster under load, round after round, and time each failover",
			Description: `Starts, from this binary, separate processes on loopback UDP multicast
(groups of their own, directories in a temporary directory): three
seqd sequencer --cluster members (with --fault-addr), a seqd replayer,
three sending nodes in safe mode (--rate commands/s each), a checking
read-only node and a fast-mode read-only node (seqd drill node: each
reads the stream from seq 1 and counts gaps, repeats and lost or
repeated commands, and digests the stream).

Each round, under load: SIGKILL of the primary; every third round instead
a partition (the primary's own Raft stream layer and stream sockets drop
everything, switched on through its fault endpoint); every fifth round a
standby of the new primary is SIGKILLed too. The faulted member is
restarted on its directory (or healed) and the drill waits until it has
caught up as a standby. A round's time runs from the fault to the first
message of the new epoch delivered to every node (the slowest node).
The schedule (groups, pauses, which standby) follows --seed.

At the end the senders stop and wait for their acks; every node must have
delivered the same stream (same last seq, same digest), each sender's
acked commands exactly once; the fast node may instead have stopped with
ErrDiverged (it is then restarted from seq 1 and checked again). Prints a
line per round and ends with
  drill failover rounds=N p50_ms=A p99_ms=B max_ms=C lost=0 dup=0 diverged=0
exiting 1 on any violation or when any child dies on its own.`,
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "rounds", Value: drill.DefaultConfig().Rounds, Usage: "failovers"},
				&cli.IntFlag{Name: "rate", Value: 1000, Usage: "commands per second of each of the three sending nodes"},
				&cli.DurationFlag{Name: "pause", Value: 500 * time.Millisecond, Usage: "load before each fault (plus a seeded extra of up to as much again)"},
				&cli.Uint64Flag{Name: "seed", Usage: "seed of the schedule and the multicast groups (0: from the clock; printed)"},
				&cli.StringFlag{Name: "timeouts", Value: "lan", Usage: "the raft timing profile of the sequencers (lan, wan, test)"},
				&cli.BoolFlag{Name: "keep", Usage: "keep the directories and logs (printed at the end)"},
				&cli.DurationFlag{Name: "soak", Usage: "before the rounds, run the load this long with no fault and count the epochs it began (a false failover each); with --rounds 0 only this"},
			},
			Action: runDrillFailover,
		}, drillNodeCommand(), drillBridgeCommand(), drillHotHotCommand(), drillHotNodeCommand()},
	}
}

func runDrillFailover(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("drill failover", c.Args().Slice())
	}
	cfg := drill.DefaultConfig()
	cfg.Rounds, cfg.RatePerSecond, cfg.Pause, cfg.Soak = c.Int("rounds"), c.Int("rate"), c.Duration("pause"), c.Duration("soak")
	if cfg.Rounds < 0 || cfg.Rounds == 0 && cfg.Soak <= 0 || cfg.RatePerSecond < 1 {
		return errors.New("drill failover: --rate must be >= 1, --rounds >= 1 (or 0 with --soak)")
	}
	cfg.Timeouts = c.String("timeouts")
	if _, ok := cluster.Profiles[cfg.Timeouts]; !ok {
		return options.OneOf("timeouts", cfg.Timeouts, "lan", "wan", "test")
	}
	cfg.Seed, cfg.Keep = c.Uint64("seed"), c.Bool("keep")
	return drill.Run(c.Context, cfg)
}

func drillNodeCommand() *cli.Command {
	return &cli.Command{
		Name:   "node",
		Usage:  "a drill's node process (started by seqd drill failover)",
		Hidden: true,
		Flags: append(transportFlags(false),
			options.String("account", "", "account of a sending node; empty: read-only"),
			options.String("node.mode", "safe", "safe | fast"),
			options.Int("rate", 1000, "commands per second"),
			options.Int("size", 64, "payload bytes per command"),
			replayerFlag(),
		),
		Action: runDrillNode,
	}
}

func runDrillNode(cc *cli.Context) error {
	log := options.NewLogger(cc)
	cfg := drill.NodeConfig{Node: node.DefaultConfig(), RatePerSecond: cc.Int("rate"), PayloadBytes: cc.Int("size"), Log: log}
	nc := &cfg.Node
	nc.RewindTLS = rewindTLS(cc)
	nc.Rewind = true
	nc.BlockWhenFull = true
	nc.Replayers = cc.StringSlice("replayer")
	nc.Account = cc.String("account")
	nc.ReadOnly = nc.Account == ""
	cfg.Mode = cc.String("node.mode")
	if err := options.OneOf("node.mode", cfg.Mode, "safe", "fast"); err != nil {
		return err
	}
	if cfg.Mode == "fast" {
		nc.Mode = node.Fast
	}
	if err := nc.Validate(); err != nil {
		return options.Keyed(err, nodeKeys)
	}
	if nc.Account != "" {
		if _, err := wire.ParseAccount(nc.Account); err != nil {
			return options.KeyError("account", fmt.Sprintf("%q", nc.Account), "1..8 printable ASCII bytes")
		}
	}
	client, err := openClient(cc, log, "node")
	if err != nil {
		return err
	}
	defer client.Close()
	err = drill.RunNode(cc.Context, cfg, client)
	if errors.Is(err, node.ErrDiverged) {
		return &codedError{code: drill.ExitDiverged, err: err}
	}
	return options.Keyed(err, nodeKeys)
}

func faultFlags() []cli.Flag {
	return []cli.Flag{
		options.String("fault-addr", "", "drills only: serve the fault-injection endpoint on this host:port (partition of Raft and the stream sockets, seeded stream loss); empty: no fault injection at all"),
		options.Uint("fault-seed", 1, "drills only: seed of the injected stream loss"),
	}
}
