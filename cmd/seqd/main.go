// Command seqd is the one binary of seqd: the sequencer, the built-in
// nodes, the tail, the benchmark and the demo.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/urfave/cli/v2"
)

func main() {
	// SEQD_CPUPROFILE=prefix makes every seqd process write a CPU profile
	// to prefix.<pid>: the way to see inside `seqd bench`'s children.
	if prefix := os.Getenv("SEQD_CPUPROFILE"); prefix != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if err := newApp().Run(os.Args); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "seqd:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "seqd",
		Usage: "a replicated sequencer: total-order broadcast over reliable UDP multicast or TCP",
		Commands: []*cli.Command{
			demoCommand(),
			sequencerCommand(),
			nodeCommand(),
			tailCommand(),
			benchCommand(),
			benchPeerCommand(),
		},
	}
}
