package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/ops/tail"
)

// `seqd replay` (and `seqd tail --archive`): flags into an ops/tail
// replay.

func replayCommand() *cli.Command {
	flags, before := options.WithConfig(append([]cli.Flag{
		options.Uint("from", 0, "first seq to replay (0: the archive's first, 1 unless its replayer started from the live tail)"),
		options.Uint("to", 0, "last seq to replay (0: to the end of the archive)"),
		options.String("account", "", "replay as a node of this account: messages it sent are Mine (shown with --format json as \"mine\")"),
		options.Int("instance", 0, "the instance of --account (hot-hot instances share an account)"),
		options.String("format", "text", "text | json (as seqd tail prints them)"),
		options.Bool("internal", true, "also print internal (sequencer-generated) messages"),
		options.Bool("quiet", false, "print no messages, only the summary line (on stdout)"),
		options.Bool("stable-only", false, "stop at the highest seq the stored packets say was stable (for the directory of a live session, whose newest records a failover may still cut)"),
		options.Bool("progress", true, "show a progress bar on stderr when it is a terminal (and the messages do not go to that terminal)"),
	}, tlsFlags()...))
	return &cli.Command{
		Name:      "replay",
		Usage:     "run a session archive (a directory, or a remote replayer) through a read-only node, offline, at full speed",
		ArgsUsage: "DIR|HOST:PORT",
		Description: `Replays the session archive in DIR (the segment files a replayer wrote, a
finished session or one still being written: nothing in DIR is changed)
through the node library's receiving code, exactly as a live read-only node
delivered it: every message once, in order, fragments reassembled, records
a deposed primary published above its epoch's cut left out.

HOST:PORT (not a directory) names a remote replayer's rewind server (its
--rewind-addr): the stream it holds is replayed the same way over TCP,
from --from (0: the oldest seq it holds) to --to, or to its newest seq
when asked (it is not followed further).

Messages are printed as seqd tail prints them; --quiet prints none. The
summary line
  replay msgs=N first=A last=B packets=P elapsed=D rate=R msg/s
goes to stdout with --quiet, else to stderr. A torn tail (a frame still
being written) is reported and not replayed; a corrupt record ends the
replay with an error naming its seq, after every message before it.

Exit status: 0 when every seq asked for was replayed; 1 on any error (a
seq not in the archive, a corrupt record, a bad flag).`,
		Flags:  flags,
		Before: before,
		Action: runReplay,
	}
}

func runReplay(cc *cli.Context) error {
	if cc.NArg() != 1 {
		return fmt.Errorf("seqd replay takes one archive directory or replayer rewind address (seqd replay DIR|HOST:PORT --from N --to M), got %d arguments", cc.NArg())
	}
	format := cc.String("format")
	if err := options.OneOf("format", format, "text", "json"); err != nil {
		return err
	}
	inst := cc.Int("instance")
	if inst < 0 || inst > 255 {
		return options.KeyError("instance", strconv.Itoa(inst), "0..255")
	}
	quiet := cc.Bool("quiet")
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	p := &tail.Printer{W: out, JSON: format == "json", Internal: cc.Bool("internal"), Quiet: quiet}
	opts := []node.ReplayOption{node.ReplayAccount(cc.String("account"), uint8(inst))}
	if cc.Bool("stable-only") {
		opts = append(opts, node.ReplayStableOnly())
	}
	summary := io.Writer(os.Stderr)
	if quiet {
		summary = out
	}
	r := tail.Replay{From: cc.Uint64("from"), To: cc.Uint64("to"), Options: opts, Summary: summary, Stop: cc.Context.Done(),
		Progress: cc.Bool("progress") && isTerminal(os.Stderr) && (quiet || !isTerminal(os.Stdout))}
	src := cc.Args().First()
	if tail.IsReplayerAddr(src) {
		// A replayer that serves rewinds over TLS: the security.tls-*
		// keys are this process's certificate.
		id, err := tlsIdentity(cc)
		if err != nil {
			return err
		}
		if id != nil {
			r.Options = append(r.Options, node.ReplayTLS(id.Client(nil)))
		}
		return tail.ReplayRemote(src, p, r)
	}
	r.Log = options.NewLogger(cc)
	return tail.ReplayArchive(src, p, r)
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// flagsFirst moves the positional arguments of `seqd replay` after its
// flags: the flag parser stops at the first positional argument, and
// `seqd replay DIR --from N` is how people write it. A flag takes the
// next argument as its value unless it is boolean (booleans take theirs
// after "=") or has "=" already.
func flagsFirst(args []string, cmd *cli.Command) []string {
	if len(args) < 3 || args[1] != cmd.Name {
		return args
	}
	bools := map[string]bool{"help": true, "h": true}
	for _, f := range cmd.Flags {
		if _, ok := f.(cli.DocGenerationFlag); ok && !f.(cli.DocGenerationFlag).TakesValue() {
			for _, n := range f.Names() {
				bools[n] = true
			}
		}
	}
	out := append([]string(nil), args[:2]...)
	var pos []string
	for i := 2; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			out = append(out, a)
			name := a[1:]
			if name[0] == '-' {
				name = name[1:]
			}
			if !strings.Contains(name, "=") && !bools[name] && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) == 0 {
		return out
	}
	// "--" keeps a directory named like a flag a directory.
	return append(append(out, "--"), pos...)
}

// runTailArchive is `seqd tail --archive DIR`: the archive's messages from
// --from (live: its first) printed as the tail prints the stream, up to
// --count of them.
func runTailArchive(cc *cli.Context, dir string) error {
	format := cc.String("format")
	if err := options.OneOf("format", format, "text", "json"); err != nil {
		return err
	}
	from, err := parseFrom(cc.String("from"))
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	p := &tail.Printer{W: out, JSON: format == "json", Internal: cc.Bool("internal"), Count: uint64(max(cc.Int("count"), 0))}
	if cc.Bool("follow") {
		if poll := cc.Duration("follow-poll"); poll <= 0 {
			return options.KeyError("follow-poll", poll.String(), "a duration > 0")
		}
		return tail.Follow(dir, from, cc.Duration("follow-poll"), p, cc.Context.Done())
	}
	return tail.ReplayArchive(dir, p, tail.Replay{From: from, Stop: cc.Context.Done(), Log: options.NewLogger(cc)})
}
