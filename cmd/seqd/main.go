// Command seqd is the one binary of seqd: the sequencer, the built-in
// nodes, the tail, the benchmark and the demo.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	app := &cli.App{
		Name:  "seqd",
		Usage: "a replicated sequencer: total-order broadcast over reliable UDP multicast or TCP",
		Commands: []*cli.Command{
			demoCommand(),
			benchCommand(),
			benchPeerCommand(),
			sequencerCommand(),
			nodeCommand(),
			tailCommand(),
		},
	}
	if err := app.Run(os.Args); err != nil {
		slog.Error("seqd", "err", err)
		fmt.Fprintln(os.Stderr, "seqd:", err)
		os.Exit(1)
	}
}
