package main

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
)

// warnLogger is the logger the warning goes to: the process's own, in
// its --log-format and --log-level (a JSON log stays all JSON).
var warnLogger func(*cli.Context) *slog.Logger = options.NewLogger

// unauthenticated names the subcommands that run a long-lived process on
// the network: each logs one WARN line at start while seqd has no
// authentication (docs/security.md says what a host on the LAN can do).
var unauthenticated = map[string]bool{"sequencer": true, "replayer": true, "node": true, "tail": true}

// noAuthWarning is the line those processes log at start.
const noAuthWarning = "seqd: running WITHOUT AUTHENTICATION: any host that reaches the stream, command, NAK, peer, rewind, Raft or admin ports can forge packets and requests; see docs/security.md"

// warnUnauthenticated makes cmd log noAuthWarning before it runs (not for
// --dry-run, which only prints the configuration).
func warnUnauthenticated(cmd *cli.Command) {
	if !unauthenticated[cmd.Name] {
		return
	}
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if before != nil {
			if err := before(c); err != nil {
				return err
			}
		}
		if !c.Bool("dry-run") {
			warnLogger(c).Warn(noAuthWarning, "process", cmd.Name)
		}
		return nil
	}
}
