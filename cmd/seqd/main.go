// Command seqd is the one binary of seqd: the sequencer, the built-in
// nodes, the tail, the benchmark and the demo.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"

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
	// SEQD_CPUPROFILE=prefix makes every seqd process write a CPU profile
	// to prefix.<pid>: the way to see inside `seqd bench`'s children.
	if prefix := os.Getenv("SEQD_CPUPROFILE"); prefix != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if err := app.Run(os.Args); err != nil {
		pprof.StopCPUProfile()
		slog.Error("seqd", "err", err)
		fmt.Fprintln(os.Stderr, "seqd:", err)
		os.Exit(1)
	}
}
