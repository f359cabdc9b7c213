// Command seqd is the one binary of seqd: the sequencer, the built-in
// nodes, the tail, the benchmark and the demo.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/ops/options"
)

// Exit statuses (README, "Exit status").
const (
	exitError       = 1 // bad configuration, or a failure while running
	exitInterrupted = 2 // `seqd node` stopped by SIGTERM/SIGINT before it was done
)

// codedError carries an exit status other than exitError up to main.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func main() {
	// SIGTERM and SIGINT are caught since stopsignal's init, before main:
	// a stop request during start-up ends the process gracefully.
	//
	// SEQD_CPUPROFILE=prefix makes every seqd process write a CPU profile
	// to prefix.<pid>: the way to see inside `seqd bench`'s children.
	if prefix := os.Getenv("SEQD_CPUPROFILE"); prefix != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	app := newApp()
	if err := app.RunContext(stopsignal.Context(), flagsFirst(os.Args, app.Command("replay"))); err != nil {
		pprof.StopCPUProfile()
		// Each error is printed once, here, with one prefix.
		fmt.Fprintln(os.Stderr, "seqd:", err)
		code := exitError
		var ce *codedError
		if errors.As(err, &ce) {
			code = ce.code
		}
		os.Exit(code)
	}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "seqd",
		Usage: "a replicated sequencer: total-order broadcast over reliable UDP multicast or TCP",
		Commands: []*cli.Command{
			demoCommand(),
			sequencerCommand(),
			replayerCommand(),
			nodeCommand(),
			tailCommand(),
			loggerCommand(),
			archiverCommand(),
			adminNodeCommand(),
			replayCommand(),
			benchCommand(),
			benchPeerCommand(),
			adminCommand(),
			drillCommand(),
			configCommand(),
			completionCommand(),
			bridgeCommand(),
			keygenCommand(),
		},
		// --log-format, --log-level and --verbose before the subcommand's
		// name serve every subcommand (its own flags, when set, win).
		Flags:  append(options.LogFlags(), &cli.BoolFlag{Name: "verbose", Usage: "debug logging"}),
		Before: options.CheckLog,
		// main prints errors; the library must not print them too.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		Version:        version(),
		// seqd completion bash|zsh prints the scripts that use it.
		EnableBashCompletion: true,
		Action:               notACommand,
	}
	addExamples(app.Commands, "")
	for _, cmd := range app.Commands {
		strict(cmd)
		withSecurity(cmd)
	}
	return app
}

// strict makes a subcommand refuse positional arguments unless it
// declares them (ArgsUsage, as `seqd replay DIR` does): one is almost
// always a mistake that would otherwise pass in silence (`--internal
// false` sets --internal and leaves "false" over; every option after it
// is dropped too).
func strict(cmd *cli.Command) {
	cmd.HideHelpCommand = true
	cmd.OnUsageError = usageError
	if len(cmd.Subcommands) > 0 {
		// Its subcommands check their own arguments.
		return
	}
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if c.NArg() > 0 && cmd.ArgsUsage == "" {
			return strayArguments(cmd.Name, c.Args().Slice())
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
}

func strayArguments(name string, args []string) error {
	return fmt.Errorf("unexpected argument(s) %q: options are --key value or --key=value, and a boolean takes its value after \"=\" (--internal=false, not --internal false); see seqd %s --help",
		strings.Join(args, " "), name)
}

// usageError reports a flag the parser refused, once, without the help
// text (seqd CMD --help shows it).
func usageError(c *cli.Context, err error, _ bool) error {
	name := "seqd"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name = "seqd " + c.Command.Name
	}
	return fmt.Errorf("%w (see %s --help)", err, name)
}

// freeAddrs is n loopback addresses free for TCP and UDP (the bench's).
func freeAddrs(n int) ([]string, error) { return freeport.Addrs(n) }
