package tail

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/seqd/seqd/node"
)

// Printer prints replayed messages as seqd tail does (a node.Handler of
// a replay); the replays below stop after Count printed messages (0: no
// limit).
type Printer struct {
	W        *bufio.Writer
	JSON     bool
	Internal bool // also print internal messages
	Quiet    bool // print none (the summary line only)
	Count    uint64
	printed  uint64
	buf      []byte
}

// OnMessage prints m.
func (p *Printer) OnMessage(m *node.Message) {
	if p.Quiet || (m.Internal() && !p.Internal) || (p.Count > 0 && p.printed >= p.Count) {
		return
	}
	p.buf = AppendMessage(p.buf[:0], m, p.JSON)
	if p.JSON && m.Mine() {
		// AppendMessage ends an object with "}\n": say whose it is.
		p.buf = append(p.buf[:len(p.buf)-2], `,"mine":true}`+"\n"...)
	}
	p.W.Write(p.buf)
	p.printed++
}

// Done says whether the Printer printed its Count.
func (p *Printer) Done() bool { return p.Count > 0 && p.printed >= p.Count }

// Replay says what to replay and how to report it.
type Replay struct {
	// From and To bound the seqs (0: the archive's first, its last or
	// the replayer's tip).
	From, To uint64
	// Options are the node's replay options (an account, stable only).
	Options []node.ReplayOption
	// Progress shows a progress bar on stderr.
	Progress bool
	// Summary receives the summary line (nil: none).
	Summary io.Writer
	// Stop ends the replay early (a signal); nil: never.
	Stop <-chan struct{}
	// Log hears about torn tails and corrupt records of an archive.
	Log *slog.Logger
}

// IsReplayerAddr reports whether src names a replayer's rewind address
// (host:port) rather than an archive directory: it is not a directory
// and splits into a host and a numeric port.
func IsReplayerAddr(src string) bool {
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

// ReplayRemote is `seqd replay HOST:PORT`: the stream a remote replayer
// holds (its rewind server) from r.From to r.To or its tip, through p.
func ReplayRemote(addr string, p *Printer, r Replay) error {
	from, to, opts := r.From, r.To, r.Options
	var pb *progressbar.ProgressBar
	if r.Progress {
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
	opts = append(opts, replayUntil(r.Stop, p))
	start := time.Now()
	st, err := node.ReplayRemote(addr, from, to, p, opts...)
	return endReplay(pb, p, r.Summary, st, start, err)
}

// endReplay closes a replay begun at start that returned st and err: the
// progress bar (nil: none) finished, p's output flushed (its error is
// returned when the replay had none) and the summary line written.
func endReplay(pb *progressbar.ProgressBar, p *Printer, summary io.Writer, st node.ReplayStats, start time.Time, err error) error {
	el := time.Since(start)
	if pb != nil {
		pb.Finish()
	}
	if flushErr := p.W.Flush(); flushErr != nil && err == nil {
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

// ReplayArchive replays the archive in dir through p, as r says.
func ReplayArchive(dir string, p *Printer, r Replay) error {
	from, to, opts, log := r.From, r.To, r.Options, r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
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
	if r.Progress && end >= from {
		pb = newReplayBar(int64(end-from+1), "replay")
		opts = append(opts, node.ReplayProgress(1<<16, func(seq uint64) {
			if seq >= from {
				pb.Set64(int64(seq - from + 1))
			}
		}))
	}
	opts = append(opts, replayUntil(r.Stop, p))
	log.Debug("replaying", "dir", dir, "session", a.Session(), "seqs", fmt.Sprintf("%d..%d", first, last), "from", from, "to", to)
	start := time.Now()
	st, err := a.Replay(from, to, p, opts...)
	return endReplay(pb, p, r.Summary, st, start, err)
}

// Follow is `seqd tail --archive DIR --follow`: it prints the
// archive from from (0: its first seq) to its end, then looks again every
// poll for the records its replayer appended since, until the printer has
// its count or a signal stops it. Each look opens the directory afresh
// (read-only, as replayArchive does), so segments that rolled meanwhile and
// epochs that began are seen; a torn tail there is a frame still being
// written, read at a later look. Only whole messages are printed, each once:
// the next look starts after the last seq delivered.
// It ends when stop is closed (nil: never). poll must be > 0.
func Follow(dir string, from uint64, poll time.Duration, p *Printer, stop <-chan struct{}) error {
	until := replayUntil(stop, p)
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
		if err := p.W.Flush(); err != nil {
			return err
		}
		if p.Done() {
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

// replayUntil ends a replay once the printer has its Count or stop is
// closed (a signal cancelled the command's context).
func replayUntil(stop <-chan struct{}, p *Printer) node.ReplayOption {
	return node.ReplayUntil(func() bool {
		if p.Done() {
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
