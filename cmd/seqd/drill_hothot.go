package main

import (
	"errors"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/drill"
	"github.com/seqd/seqd/tiered"
)

// `seqd drill hothot` and its hidden `seqd drill hotnode`: flags into
// drill.HotHotConfig and drill.HotNodeConfig (test/drill runs them).

func drillHotHotCommand() *cli.Command {
	d := drill.DefaultHotHotConfig()
	return &cli.Command{
		Name:  "hothot",
		Usage: "fault the active instance of a hot-hot pair under load, round after round, and time each switch",
		Description: `Starts, from this binary, separate processes on loopback UDP multicast:
three seqd sequencer --cluster members (--sequencer.active-timeout), a
seqd replayer, a pair of examples/inventory instances of the hot-hot
account SHOP (seqd drill hotnode, each on its SQLite database in the
drill's directory, replying to every transaction), an inventory front
(the gateway node of account LOAD, HTTP) that the drill restocks and
storms with buyers (one-item reservations, a crowd every 100 ms), and a
checker reading the stream from seq 1.

Each round, under load: SIGKILL of the active instance (restarted, as the
new passive: it loads its database and rewinds from the flushed seq + 1); every third round instead seqd admin
force-passive of it; every fifth round instead SIGSTOP of it for twice
the active-timeout, then SIGCONT (the stale active must be fenced and
learn it is passive). A round's time runs from the fault to the first
command of the new active in the stream (as the checker delivers it).

At the end the buyers stop; every buyer must have had one answer, a sale
or sold out (lost), as many sales as the stream's; the checker counts
transactions unreplied (lost)
or answered twice or by an instance that was not active (dup), items
sold beyond the stock or a reply showing a stock below zero (oversold);
the services' digests, noted every 100 seqs by every incarnation, must
agree at every seq both applied
(diverged). Ends with
  drill hothot rounds=N p50_ms=A max_ms=B lost=0 dup=0 oversold=0 diverged=0
exiting 1 on any violation or when any child dies on its own.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rounds", Value: d.Rounds, Usage: "faults of the active instance"},
			&cli.IntFlag{Name: "rate", Value: d.RatePerSecond, Usage: "buyers per second (through the inventory front)"},
			&cli.Int64Flag{Name: "stock", Value: d.Stock, Usage: "items the pair starts with"},
			&cli.DurationFlag{Name: "active-timeout", Value: d.ActiveTimeout, Usage: "the sequencers' sequencer.active-timeout"},
			&cli.DurationFlag{Name: "pause", Value: d.Pause, Usage: "load before each fault"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the multicast groups (0: from the clock; printed)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the directories and logs (printed at the end)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return strayArguments("drill hothot", c.Args().Slice())
			}
			cfg := drill.DefaultHotHotConfig()
			cfg.Rounds, cfg.RatePerSecond, cfg.Stock = c.Int("rounds"), c.Int("rate"), c.Int64("stock")
			cfg.ActiveTimeout, cfg.Pause = c.Duration("active-timeout"), c.Duration("pause")
			cfg.Seed, cfg.Keep = c.Uint64("seed"), c.Bool("keep")
			return drill.RunHotHot(c.Context, cfg)
		},
	}
}

func drillHotNodeCommand() *cli.Command {
	return &cli.Command{
		Name:   "hotnode",
		Usage:  "a hot-hot drill's instance or checker process (started by seqd drill hothot)",
		Hidden: true,
		Flags: append(append(transportFlags(false),
			options.String("account", "", "the hot-hot account"),
			options.Uint("instance", 1, "this instance (1..255)"),
			options.String("load", "LOAD", "the account whose commands are orders"),
			options.Int("stock", 2000, "items the drill restocks first (the checker's bound)"),
			options.String("db", "", "an instance's SQLite database file"),
			options.String("front", "", "be the load: an inventory front serving HTTP on this address"),
			&cli.BoolFlag{Name: "check", Usage: "be the checker (read-only) instead of an instance"},
			replayerFlag(),
		), gossipFlags(false)...),
		Action: func(cc *cli.Context) error {
			log := options.NewLogger(cc)
			if cc.String("account") == "" {
				return errors.New("drill hotnode: --account is required")
			}
			cfg := drill.HotNodeConfig{Node: node.DefaultConfig(), Load: cc.String("load"), Stock: int64(cc.Int("stock")), Check: cc.Bool("check"), DB: cc.String("db"), Front: cc.String("front")}
			nc := &cfg.Node
			nc.Account, nc.Instance = cc.String("account"), uint8(cc.Uint("instance"))
			nc.Replayers = cc.StringSlice("replayer")
			nc.SilenceTimeout = 3 * time.Second
			if gossipOn(cc) {
				cfg.Announce = func(state func() (bool, uint64)) (io.Closer, error) {
					account := nc.Account
					if cfg.Check {
						account = "" // the checker reads; it is no instance
					}
					// The agent names the Meta itself.
					a, err := startGossip(cc, log, func() tiered.Meta {
						active, applied := state()
						return tiered.Meta{Role: tiered.RoleNode, Account: account, Instance: nc.Instance, Active: active, Applied: applied}
					})
					if err != nil {
						return nil, err
					}
					return a, nil
				}
			}
			client, err := openClient(cc, log, "node")
			if err != nil {
				return err
			}
			defer client.Close()
			return options.Keyed(drill.RunHotNode(cc.Context, cfg, client), nodeKeys)
		},
	}
}
