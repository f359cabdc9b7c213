package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
)

// `seqd config print-defaults`: the configuration reference, from the
// subcommands' flags (whose defaults are their packages' DefaultConfig).

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "configuration reference: every key with its default",
		Subcommands: []*cli.Command{{
			Name:      "print-defaults",
			Usage:     "print every configuration key with its default and a comment, as a TOML file",
			ArgsUsage: "[SUBCOMMAND]",
			Description: `With no argument, prints every key of every subcommand once, with its
default, what it bounds, the subcommands that take it, its flag and its
variable (a key whose default differs between subcommands once per
subcommand). With SUBCOMMAND, prints that subcommand's keys only. The
keys are commented out ("# ttl = 1"): a key set in a file counts as
given, so uncomment only what you change; the file then loads with
--config (one file can serve every seqd process of a host: a subcommand
ignores the keys of the others). docs/config.md is this output.`,
			Action: func(c *cli.Context) error {
				if c.NArg() > 1 {
					return strayArguments("config print-defaults", c.Args().Slice()[1:])
				}
				return printDefaults(os.Stdout, c.App, c.Args().First())
			},
		}},
	}
}

// printDefaults writes the reference of app's subcommands (or of only).
func printDefaults(w io.Writer, app *cli.App, only string) error {
	var names []string
	by := map[string][]options.Key{}
	for _, cmd := range app.Commands {
		keys := options.Keys(cmd.Flags)
		if len(keys) == 0 || only != "" && cmd.Name != only {
			continue
		}
		names = append(names, cmd.Name)
		by[cmd.Name] = keys
	}
	if len(names) == 0 {
		return fmt.Errorf("config print-defaults: no subcommand %q takes configuration keys (see seqd --help)", only)
	}
	fmt.Fprintf(w, "# seqd configuration: every key with its default (seqd config print-defaults%s).\n", map[bool]string{true: "", false: " " + only}[only == ""])
	fmt.Fprintf(w, "# A flag (--key) beats its variable (SEQD_KEY), which beats this file.\n\n")
	return options.WriteTOML(w, options.Merge(names, by))
}
