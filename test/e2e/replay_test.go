package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// storeSink appends a sequencer's data packets to a Store, as a replayer
// does, and keeps every frame for a live node.
type storeSink struct {
	t    *testing.T
	s    *replayer.Store
	live [][]byte
}

func (k *storeSink) Publish(pkt []byte) {
	k.live = append(k.live, bytes.Clone(pkt))
	if kind, _ := wire.PeekKind(pkt); kind == wire.KindData {
		if err := k.s.Append(pkt); err != nil {
			k.t.Fatalf("store: %v", err)
		}
	}
}

func (k *storeSink) SendTo(transport.Peer, []byte) {}

// tailLine is one line of `seqd tail --format json` / `seqd replay`.
type tailLine struct {
	Seq      uint64 `json:"seq"`
	Epoch    uint32 `json:"epoch"`
	Time     int64  `json:"time"`
	Account  string `json:"account"`
	Instance uint8  `json:"instance"`
	CmdSeq   uint64 `json:"cmd_seq"`
	Size     int    `json:"size"`
	CRC      uint32 `json:"crc"`
	Internal bool   `json:"internal"`
	Mine     bool   `json:"mine"`
}

// liveLines is what a live read-only node of alice delivered, in the
// JSON fields the CLI prints (internal records carry their sender's
// account, which this test does not compare).
type liveLines struct{ lines []tailLine }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (l *liveLines) OnMessage(m *node.Message) {
	l.lines = append(l.lines, tailLine{Seq: m.Seq, Epoch: m.Epoch, Time: m.Time, Account: m.Account.String(), Instance: m.Instance,
		CmdSeq: m.CmdSeq, Size: len(m.Payload), CRC: crc32.Checksum(m.Payload, castagnoli), Internal: m.Internal(), Mine: m.Mine()})
}

type noOutput struct{}

func (noOutput) Send([]byte) {}

// writeSessionArchive runs a sequencer Core in-process into a Store (as
// `seqd replayer` persists the stream) and returns the directory and what
// a live node of alice delivered.
func writeSessionArchive(t *testing.T, n int) (string, []tailLine) {
	t.Helper()
	w := newArchiveWriter(t, filepath.Join(t.TempDir(), "session"))
	w.add(n)
	w.close()
	return w.dir, w.liveLines()
}

// archiveWriter is a sequencer Core writing into a Store, command by
// command, so that a test can grow an archive while a reader follows it.
type archiveWriter struct {
	t       *testing.T
	dir     string
	s       *replayer.Store
	k       *storeSink
	c       sequencer.SinkShell
	clock   int64
	cmdSeqs map[wire.Account]uint64
	n       int
}

func newArchiveWriter(t *testing.T, dir string) *archiveWriter {
	t.Helper()
	scfg := replayer.DefaultConfig()
	scfg.Sync = replayer.SyncNone
	scfg.SegmentBytes = 128 << 10
	s, _, err := replayer.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &storeSink{t: t, s: s}
	cfg := sequencer.DefaultConfig()
	cfg.Session = 4242
	c, err := sequencer.NewSinkShell(cfg, k)
	if err != nil {
		t.Fatal(err)
	}
	return &archiveWriter{t: t, dir: dir, s: s, k: k, c: c, clock: 1_750_000_000_000_000_000, cmdSeqs: map[wire.Account]uint64{}}
}

// add sequences n more commands (some fragmented) and hands every packet
// to the OS (Sync), so a reader of the directory sees them.
func (a *archiveWriter) add(n int) {
	t := a.t
	t.Helper()
	for range n {
		a.n++
		i := a.n
		acct, inst := wire.MustAccount("alice"), uint8(0)
		if i%3 == 0 {
			acct, inst = wire.MustAccount("bob"), 2
		}
		a.cmdSeqs[acct]++
		size := 20 + i%200
		if i%101 == 0 {
			size = 4000 // fragmented in the stream
		}
		var w wire.CommandWriter
		if err := w.Reset(make([]byte, 8<<10), acct, inst, 1, 4242); err != nil {
			t.Fatal(err)
		}
		p := bytes.Repeat([]byte{byte(i)}, size)
		if err := w.Append(&wire.Command{CmdSeq: a.cmdSeqs[acct], Payload: p}); err != nil {
			t.Fatal(err)
		}
		a.clock += 1500
		now := sequencer.Time{Mono: a.clock, Wall: a.clock}
		if err := a.c.Step(now, w.Bytes(), 1); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			a.c.Flush(now)
		}
	}
	a.c.Flush(sequencer.Time{Mono: a.clock, Wall: a.clock})
	if err := a.s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := a.c.Stats().Commands; got != uint64(a.n) {
		t.Fatalf("the sequencer sequenced %d of %d commands", got, a.n)
	}
}

func (a *archiveWriter) close() {
	if err := a.s.Close(); err != nil {
		a.t.Fatal(err)
	}
}

// liveLines is what a live read-only node of alice delivered of
// everything written so far.
func (a *archiveWriter) liveLines() []tailLine {
	t := a.t
	t.Helper()
	ncfg := node.DefaultConfig()
	ncfg.ReadOnly, ncfg.Rewind, ncfg.Account = true, true, "alice"
	live := &liveLines{}
	core, err := node.NewCore(ncfg, live, noOutput{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range a.k.live {
		if err := core.Step(int64(i), f); err != nil {
			t.Fatal(err)
		}
	}
	return live.lines
}

func parseLines(t *testing.T, out []byte) []tailLine {
	t.Helper()
	var lines []tailLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l tailLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

func sameLines(t *testing.T, what string, got, want []tailLine) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if w.Internal {
			g.Account, w.Account, g.Instance, w.Instance = "", "", 0, 0
		}
		if g != w {
			t.Fatalf("%s: message %d: %+v, want %+v", what, i, g, w)
		}
	}
}

func run(t *testing.T, bin string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// TestCLI_Replay: `seqd replay DIR` prints an archive written by a
// sequencer into a store exactly as a live node of the account delivered
// it (seq, epoch, time, sender, payload size and CRC, Mine), with a
// summary line and no progress bar when not on a terminal; --from/--to
// and --quiet; `seqd tail --archive`; a corrupt byte fails with the seq
// named, after the messages before it.
func TestCLI_Replay(t *testing.T) {
	bin := seqd(t)
	dir, live := writeSessionArchive(t, 3000)
	before, _ := os.ReadDir(dir)

	out, errOut, err := run(t, bin, "replay", dir, "--format", "json", "--account", "alice")
	if err != nil {
		t.Fatalf("seqd replay: %v\n%s", err, errOut)
	}
	sameLines(t, "seqd replay", parseLines(t, out), live)
	last := live[len(live)-1].Seq
	if !bytes.Contains(errOut, []byte(fmt.Sprintf("replay msgs=%d first=1 last=%d ", len(live), last))) || !bytes.Contains(errOut, []byte("msg/s")) {
		t.Fatalf("no summary line on stderr:\n%s", errOut)
	}
	if bytes.ContainsAny(errOut, "\r\x1b") {
		t.Fatalf("a progress bar was drawn on a stderr that is no terminal:\n%q", errOut)
	}

	out, errOut, err = run(t, bin, "replay", dir, "--from", "100", "--to", "199", "--quiet")
	if err != nil {
		t.Fatalf("seqd replay --quiet: %v\n%s", err, errOut)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "replay msgs=100 first=100 last=199 ") || strings.Count(got, "\n") != 0 {
		t.Fatalf("--quiet stdout %q", got)
	}

	// On a terminal (script(1) gives it one) a progress bar is drawn.
	if script, err := exec.LookPath("script"); err == nil {
		out, err := exec.Command(script, "-qfec", bin+" replay "+dir+" --quiet", "/dev/null").CombinedOutput()
		if err != nil {
			t.Fatalf("seqd replay on a terminal: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte("\rreplay ")) || !bytes.Contains(out, []byte("% |")) {
			t.Fatalf("no progress bar on a terminal:\n%q", out)
		}
	} else {
		t.Log("no script(1): the progress bar on a terminal is not checked")
	}

	out, errOut, err = run(t, bin, "tail", "--archive", dir, "--from", "10", "--count", "25", "--format", "json")
	if err != nil {
		t.Fatalf("seqd tail --archive: %v\n%s", err, errOut)
	}
	tail := parseLines(t, out)
	for i := range tail {
		tail[i].Mine = false
	}
	want := append([]tailLine(nil), live[9:34]...)
	for i := range want {
		want[i].Mine = false
	}
	sameLines(t, "seqd tail --archive", tail, want)

	if _, errOut, err = run(t, bin, "replay", dir, "--from", fmt.Sprint(last+1)); err == nil || !bytes.Contains(errOut, []byte("seqs not in the archive")) {
		t.Fatalf("replay past the end: %v\n%s", err, errOut)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("replay changed the directory: %d files, were %d", len(after), len(before))
	}

	// A corrupt byte in the middle of the third segment.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	b, err := os.ReadFile(segs[2])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(segs[2], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = run(t, bin, "replay", dir, "--format", "json", "--account", "alice")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("replay of a corrupt archive: %v\n%s", err, errOut)
	}
	got := parseLines(t, out)
	if len(got) == 0 || len(got) >= len(live) {
		t.Fatalf("%d messages before the corruption", len(got))
	}
	bad := got[len(got)-1].Seq + 1
	if !bytes.Contains(errOut, []byte(fmt.Sprintf("seq %d", bad))) || !bytes.Contains(errOut, []byte("corrupt")) {
		t.Fatalf("the error does not name seq %d:\n%s", bad, errOut)
	}
	sameLines(t, "replay up to the corruption", got, live[:len(got)])
	t.Logf("%s", errOut)
}

// TestCLI_TailArchiveFollow: `seqd tail --archive DIR --follow` prints an
// archive that is still being written up to its end, then what is
// appended after it (segments rolling, fragmented messages), each message
// once and in order, as a live node delivered them, and stops at --count.
func TestCLI_TailArchiveFollow(t *testing.T) {
	bin := seqd(t)
	w := newArchiveWriter(t, filepath.Join(t.TempDir(), "session"))
	defer w.close()
	w.add(500)
	const from, count = 10, 1400
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "tail", "--archive", w.dir, "--follow", "--follow-poll", "20ms",
		"--from", fmt.Sprint(from), "--count", fmt.Sprint(count), "--format", "json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for range 3 {
		time.Sleep(100 * time.Millisecond) // let it reach the end and wait there
		select {
		case err := <-done:
			t.Fatalf("seqd tail --follow ended before the archive had %d messages: %v\n%s", count, err, errOut.Bytes())
		default:
		}
		w.add(400)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("seqd tail --follow: %v\n%s", err, errOut.Bytes())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("seqd tail --follow did not stop at --count %d; stderr:\n%s", count, errOut.Bytes())
	}
	got := parseLines(t, out.Bytes())
	for i := range got {
		got[i].Mine = false
	}
	live := w.liveLines()
	want := append([]tailLine(nil), live[from-1:from-1+count]...)
	for i := range want {
		want[i].Mine = false
	}
	sameLines(t, "seqd tail --archive --follow", got, want)
}
