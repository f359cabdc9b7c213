package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
)

func replayCommand() *cli.Command {
	flags, before := options.WithConfig([]cli.Flag{
		options.Uint("from", 0, "first seq to replay (0: the archive's first, 1 unless its replayer started from the live tail)"),
		options.Uint("to", 0, "last seq to replay (0: to the end of the archive)"),
		options.String("account", "", "replay as a node of this account: messages it sent are Mine (shown with --format json as \"mine\")"),
		options.Int("instance", 0, "the instance of --account (hot-hot instances share an account)"),
		options.String("format", "text", "text | json (as seqd tail prints them)"),
		options.Bool("internal", true, "also print internal (sequencer-generated) messages"),
		options.Bool("quiet", false, "print no messages, only the summary line (on stdout)"),
		options.Bool("stable-only", false, "stop at the highest seq the stored packets say was stable (for the directory of a live session, whose newest records a failover may still cut)"),
		options.Bool("progress", true, "show a progress bar on stderr when it is a terminal (and the messages do not go to that terminal)"),
	})
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

// archivePrinter prints replayed messages as seqd tail does; it stops
// the replay after count printed messages (0: no limit).
type archivePrinter struct {
	w        *bufio.Writer
	json     bool
	internal bool
	quiet    bool
	count    uint64
	printed  uint64
	buf      []byte
}

func (p *archivePrinter) OnMessage(m *node.Message) {
	if p.quiet || (m.Internal() && !p.internal) || (p.count > 0 && p.printed >= p.count) {
		return
	}
	p.buf = appendMessage(p.buf[:0], m, p.json)
	if p.json && m.Mine() {
		// appendMessage ends an object with "}\n": say whose it is.
		p.buf = append(p.buf[:len(p.buf)-2], `,"mine":true}`+"\n"...)
	}
	p.w.Write(p.buf)
	p.printed++
}

func (p *archivePrinter) done() bool { return p.count > 0 && p.printed >= p.count }

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
	p := &archivePrinter{w: out, json: format == "json", internal: cc.Bool("internal"), quiet: quiet}
	opts := []node.ReplayOption{node.ReplayAccount(cc.String("account"), uint8(inst))}
	if cc.Bool("stable-only") {
		opts = append(opts, node.ReplayStableOnly())
	}
	summary := io.Writer(os.Stderr)
	if quiet {
		summary = out
	}
	bar := cc.Bool("progress") && isTerminal(os.Stderr) && (quiet || !isTerminal(os.Stdout))
	src := cc.Args().First()
	if isReplayerAddr(src) {
		return replayRemote(cc, src, cc.Uint64("from"), cc.Uint64("to"), p, opts, bar, summary)
	}
	return replayArchive(cc, options.NewLogger(cc), src, cc.Uint64("from"), cc.Uint64("to"), p, opts, bar, summary)
}

// isReplayerAddr reports whether src names a replayer's rewind address
// (host:port) rather than an archive directory: it is not a directory
// and splits into a host and a numeric port.
func isReplayerAddr(src string) bool {
	if fi, err := os.Stat(src); err == nil && fi.IsDir() {
		return false
	}
	_, port, err := net.SplitHostPort(src)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// replayRemote is `seqd replay HOST:PORT`: the stream a remote replayer
// holds (its rewind server) from --from to --to or its tip, through p.
func replayRemote(cc *cli.Context, addr string, from, to uint64, p *archivePrinter, opts []node.ReplayOption, bar bool, summary io.Writer) error {
	var pb *progressbar.ProgressBar
	if bar {
		total := int64(-1) // the replayer's tip is known once it answers
		if to != 0 && to >= from {
			total = int64(to - max(from, 1) + 1)
		}
		pb = newReplayBar(total, "replay "+addr)
		first := uint64(0)
		opts = append(opts, node.ReplayProgress(1<<16, func(seq uint64) {
			if first == 0 {
				first = seq
			}
			pb.Set64(int64(seq - first + 1))
		}))
	}
	opts = append(opts, replayUntil(cc, p))
	start := time.Now()
	st, err := node.ReplayRemote(addr, from, to, p, opts...)
	return endReplay(pb, p, summary, st, start, err)
}

// endReplay closes a replay begun at start that returned st and err: the
// progress bar (nil: none) finished, p's output flushed (its error is
// returned when the replay had none) and the summary line written.
func endReplay(pb *progressbar.ProgressBar, p *archivePrinter, summary io.Writer, st node.ReplayStats, start time.Time, err error) error {
	el := time.Since(start)
	if pb != nil {
		pb.Finish()
	}
	if flushErr := p.w.Flush(); flushErr != nil && err == nil {
		err = flushErr
	}
	writeReplaySummary(summary, st, el)
	return err
}

// writeReplaySummary writes the summary line of a replay (nil: none).
func writeReplaySummary(summary io.Writer, st node.ReplayStats, el time.Duration) {
	if summary == nil {
		return
	}
	rate := 0.0
	if el > 0 {
		rate = float64(st.Messages) / el.Seconds()
	}
	fmt.Fprintf(summary, "replay msgs=%d first=%d last=%d packets=%d elapsed=%s rate=%.0f msg/s\n",
		st.Messages, st.First, st.Last, st.Packets, el.Round(time.Microsecond), rate)
	if f, ok := summary.(*bufio.Writer); ok {
		f.Flush()
	}
}

// replayArchive replays dir through p, with a progress bar on stderr
// when bar is set, and writes the summary line to summary (nil: none).
func replayArchive(cc *cli.Context, log *slog.Logger, dir string, from, to uint64, p *archivePrinter, opts []node.ReplayOption, bar bool, summary io.Writer) error {
	a, err := node.OpenArchive(dir)
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	defer a.Close()
	rec := a.Recovery()
	if len(rec.Cuts) > 0 {
		for _, c := range rec.Cuts {
			log.Warn("archive has a torn tail (a frame being written, or cut short by a crash); it is not replayed and left in place",
				"file", c.File, "offset", c.Offset, "bytes", c.Bytes, "after_seq", c.AfterSeq)
		}
	}
	if rec.Corrupt != nil {
		log.Error("archive is corrupt: nothing from the named seq on is replayed", "file", rec.Corrupt.File,
			"offset", rec.Corrupt.Offset, "seq", rec.Corrupt.Seq, "reason", rec.Corrupt.Reason)
	}
	first, last := a.Seqs()
	end := last
	if to != 0 {
		end = min(to, last)
	}
	if from == 0 {
		from = max(first, 1)
	}
	var pb *progressbar.ProgressBar
	if bar && end >= from {
		pb = newReplayBar(int64(end-from+1), "replay")
		opts = append(opts, node.ReplayProgress(1<<16, func(seq uint64) {
			if seq >= from {
				pb.Set64(int64(seq - from + 1))
			}
		}))
	}
	opts = append(opts, replayUntil(cc, p))
	log.Debug("replaying", "dir", dir, "session", a.Session(), "seqs", fmt.Sprintf("%d..%d", first, last), "from", from, "to", to)
	start := time.Now()
	st, err := a.Replay(from, to, p, opts...)
	return endReplay(pb, p, summary, st, start, err)
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
	p := &archivePrinter{w: out, json: format == "json", internal: cc.Bool("internal"), count: uint64(max(cc.Int("count"), 0))}
	if cc.Bool("follow") {
		return followArchive(cc, dir, from, cc.Duration("follow-poll"), p)
	}
	return replayArchive(cc, options.NewLogger(cc), dir, from, 0, p, nil, false, nil)
}

// followArchive is `seqd tail --archive DIR --follow`: it prints the
// archive from from (0: its first seq) to its end, then looks again every
// poll for the records its replayer appended since, until the printer has
// its count or a signal stops it. Each look opens the directory afresh
// (read-only, as replayArchive does), so segments that rolled meanwhile and
// epochs that began are seen; a torn tail there is a frame still being
// written, read at a later look. Only whole messages are printed, each once:
// the next look starts after the last seq delivered.
func followArchive(cc *cli.Context, dir string, from uint64, poll time.Duration, p *archivePrinter) error {
	if poll <= 0 {
		return options.KeyError("follow-poll", poll.String(), "a duration > 0")
	}
	stop := cc.Context.Done()
	until := replayUntil(cc, p)
	next := from
	for {
		a, err := node.OpenArchive(dir)
		if err != nil {
			return fmt.Errorf("archive %s: %w", dir, err)
		}
		if rec := a.Recovery(); rec.Corrupt != nil {
			a.Close()
			return fmt.Errorf("archive %s: corrupt at seq %d (%s, offset %d): %s", dir, rec.Corrupt.Seq, rec.Corrupt.File, rec.Corrupt.Offset, rec.Corrupt.Reason)
		}
		first, last := a.Seqs()
		if next == 0 {
			next = max(first, 1)
		}
		if last >= next {
			st, err := a.Replay(next, 0, p, until)
			if err != nil {
				a.Close()
				return err
			}
			if st.Last >= next {
				next = st.Last + 1
			}
		}
		a.Close()
		if err := p.w.Flush(); err != nil {
			return err
		}
		if p.done() {
			return nil
		}
		select {
		case <-stop:
			return nil
		case <-time.After(poll):
		}
	}
}

// newReplayBar is the progress bar of a replay on stderr: total messages
// (-1 while unknown), counted and timed, cleared when done.
func newReplayBar(total int64, desc string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish())
}

// replayUntil ends a replay once the printer has its --count or a signal
// cancelled the command's context.
func replayUntil(cc *cli.Context, p *archivePrinter) node.ReplayOption {
	stop := cc.Context.Done()
	return node.ReplayUntil(func() bool {
		if p.done() {
			return true
		}
		select {
		case <-stop:
			return true
		default:
			return false
		}
	})
}
