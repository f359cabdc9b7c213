package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func freeUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// replayerProc is a running `seqd replayer`.
type replayerProc struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *syncBuffer
	ready  string
}

// startReplayer runs `seqd replayer` and returns once it printed its
// ready line. It is killed when the test ends, if still running.
func startReplayer(t *testing.T, ctx context.Context, bin string, args []string) *replayerProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"replayer"}, args...)...)
	p := &replayerProc{cmd: cmd}
	p.lines, p.stderr = startPiped(t, cmd)
	if !p.lines.Scan() || !strings.HasPrefix(p.lines.Text(), "replayer: ready") {
		t.Fatalf("replayer did not start: %q\n%s", p.lines.Text(), p.stderr.String())
	}
	p.ready = p.lines.Text()
	return p
}

// stop sends SIGTERM and returns the stopped line; the exit must be 0.
func (p *replayerProc) stop(t *testing.T) string {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var stopped string
	for p.lines.Scan() {
		if strings.HasPrefix(p.lines.Text(), "replayer: stopped") {
			stopped = p.lines.Text()
		}
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("replayer exit after SIGTERM: %v\n%s", err, p.stderr.String())
	}
	return stopped
}

// field reads key=N from a status line.
func field(t *testing.T, line, key string) uint64 {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s in %q: %v", key, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", key, line)
	return 0
}

// allocsPerMsg reads allocs_per_msg=F from a status line.
func allocsPerMsg(t *testing.T, line string) float64 {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "allocs_per_msg="); ok {
			a, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("allocs_per_msg in %q: %v", line, err)
			}
			return a
		}
	}
	t.Fatalf("no allocs_per_msg in %q", line)
	return 0
}

// tailed is one line of `seqd tail --format json`.
type tailed struct {
	Seq     uint64 `json:"seq"`
	Account string `json:"account"`
	CmdSeq  uint64 `json:"cmd_seq"`
	Type    string `json:"type"`
}

// checkWholeStream checks a JSON tail from seq 1: dense seqs 1..last,
// and account's commands 1..count once and in order.
func checkWholeStream(t *testing.T, out string, last uint64, account string, count int) {
	t.Helper()
	var seq uint64
	cmds := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m tailed
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		seq++
		if m.Seq != seq {
			t.Fatalf("tail: seq %d where %d was due", m.Seq, seq)
		}
		if m.Account == account && m.Type == "" {
			cmds++
			if m.CmdSeq != uint64(cmds) {
				t.Fatalf("tail: command %d of %s where %d was due", m.CmdSeq, account, cmds)
			}
		}
	}
	if seq != last || cmds != count {
		t.Fatalf("tail: seqs 1..%d with %d commands of %s, want 1..%d with %d", seq, cmds, account, last, count)
	}
}

// TestCLI_ReplayerRepairsWhatTheRingEvicted: with a sequencer ring of 64
// small packets, seq 1 is long gone after 2000 commands: a tail from seq
// 1 without a replayer fails naming the range; with --replayer, and 10%
// injected loss at the tail, it NAKs the sequencer, gets Gone, moves to
// the replayer and prints the whole stream, dense and in order. A late
// node (which reads the stream from seq 1) with the same loss does too.
// Over TCP the same: the tail and the node dial the replayer's NAK
// address as a repair source.
func TestCLI_ReplayerRepairsWhatTheRingEvicted(t *testing.T) {
	for _, kind := range []string{"udp", "tcp"} {
		t.Run(kind, func(t *testing.T) { replayerRepairs(t, kind) })
	}
}

func replayerRepairs(t *testing.T, kind string) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mc := groups(4242)
	net := udpArgs(mc)
	var nak string
	if kind == "tcp" {
		net = []string{"--transport", "tcp", "--tcp.addr", freeTCPAddr(t)}
		nak = freeTCPAddr(t)
	} else {
		nak = freeUDPAddr(t)
	}
	seq, seqLines, seqErr := startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "94208"}, net...))
	rep := startReplayer(t, ctx, bin, append([]string{"--dir", t.TempDir(), "--nak-addr", nak}, net...))

	run := func(env string, args ...string) (string, error) {
		return seqdOutput(ctx, bin, []string{env}, append(args, net...)...)
	}
	const count = 2000
	out, err := run("X=1", "node", "--account", "EARLY", "--count", fmt.Sprint(count), "--rate", "5000", "--size", "200")
	if err != nil {
		t.Fatalf("node EARLY: %v\n%s", err, out)
	}
	last := field(t, out[strings.Index(out, "node: ok"):], "last_seq")

	// The ring no longer holds seq 1.
	if out, err := run("X=1", "tail", "--format", "json", "--from", "1", "--count", "1"); err == nil || !strings.Contains(out, "no longer retained by sequencer") {
		t.Fatalf("tail --from 1 with no replayer: %v\n%s", err, out)
	}
	// With the replayer, through 10% loss.
	out, err = run("SEQD_FAULTS=loss=0.1,seed=5", "tail", "--format", "json", "--from", "1", "--count", fmt.Sprint(last), "--replayer", nak)
	if err != nil {
		t.Fatalf("tail --from 1 --replayer: %v\n%s", err, out)
	}
	checkWholeStream(t, out, last, "EARLY", count)

	out, err = run("SEQD_FAULTS=loss=0.1,seed=6", "node", "--account", "LATE", "--count", "10", "--expect", fmt.Sprint(count), "--replayer", nak)
	if err != nil || !strings.Contains(out, "node: ok account=LATE sent=10 acked=10") {
		t.Fatalf("late node with --replayer: %v\n%s", err, out)
	}

	stopped := rep.stop(t)
	t.Log(stopped)
	if field(t, stopped, "naks") == 0 || field(t, stopped, "retransmitted") == 0 || field(t, stopped, "contiguous") < last {
		t.Fatalf("replayer stopped line %q: want NAKs answered and the stream held up to %d", stopped, last)
	}
	stopSequencer(t, seq, seqLines, seqErr)
}

// newestSegment is the path of the highest-numbered segment in dir.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func dirBytes(dir string) int64 {
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	var n int64
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestCLI_ReplayerSIGKILLMidWrite: a replayer killed with SIGKILL while
// a node streams at 50k msg/s, its newest segment then given a torn
// frame (what a crash inside a write leaves), restarts: it logs the cut
// naming the last seq kept, resumes from there, and at the end its store
// serves the whole session, gap-free, to a tail from seq 1 that the
// sequencer's ring can no longer serve.
func TestCLI_ReplayerSIGKILLMidWrite(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc := groups(4343)
	net := udpArgs(mc)
	seq, seqLines, seqErr := startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", fmt.Sprint(8 << 20)}, net...))
	dir := t.TempDir()
	nak := freeUDPAddr(t)
	repArgs := append([]string{"--dir", dir, "--nak-addr", nak, "--store.segment-bytes", fmt.Sprint(1 << 20)}, net...)
	rep := startReplayer(t, ctx, bin, repArgs)

	const count = 150000
	node := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "FEED", "--count", fmt.Sprint(count), "--rate", "50000", "--size", "100"}, net...)...)
	var nodeOut syncBuffer
	node.Stdout, node.Stderr = &nodeOut, &nodeOut
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	for dirBytes(dir) < 3<<20 {
		if ctx.Err() != nil {
			t.Fatalf("the replayer never wrote 3 MiB:\n%s", rep.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := rep.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = rep.cmd.Wait()
	// A frame cut short: its header says 1000 bytes of packet, 10 follow.
	seg := newestSegment(t, dir)
	torn := make([]byte, 16+10)
	binary.LittleEndian.PutUint32(torn[4:], 1000)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	rep = startReplayer(t, ctx, bin, repArgs)
	kept := field(t, rep.ready, "contiguous")
	logged := rep.stderr.String()
	if kept == 0 || !strings.Contains(logged, "cut a torn tail") || !strings.Contains(logged, fmt.Sprintf("after_seq=%d", kept)) {
		t.Fatalf("restart after SIGKILL: kept %d; the log must name the cut after seq %d:\n%s", kept, kept, logged)
	}
	t.Logf("restarted at seq %d; %s", kept, logged[strings.Index(logged, "recovery="):])

	if err := node.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, nodeOut.String())
	}
	out := nodeOut.String()
	last := field(t, out[strings.Index(out, "node: ok"):], "last_seq")

	tail := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json", "--from", "1", "--count", fmt.Sprint(last), "--replayer", nak}, net...)...)
	var tailOut, tailErr syncBuffer
	tail.Stdout, tail.Stderr = &tailOut, &tailErr
	if err := tail.Run(); err != nil {
		t.Fatalf("tail --from 1 --replayer: %v\n%s", err, tailErr.String())
	}
	checkWholeStream(t, tailOut.String(), last, "FEED", count)

	stopped := rep.stop(t)
	t.Log(stopped)
	if field(t, stopped, "durable") < last || field(t, stopped, "retransmitted") == 0 {
		t.Fatalf("replayer stopped line %q: want the stream durable up to %d and NAKs answered", stopped, last)
	}
	// Writing allocates nothing per message: what remains is per segment
	// (1 MiB here), per NAK answered and the runtime's own.
	if a := allocsPerMsg(t, stopped); a > 0.05 {
		t.Fatalf("replayer allocated %.4f times per message stored", a)
	}
	stopSequencer(t, seq, seqLines, seqErr)
}

// TestCLI_ReplayerFailsLoudly: what a replayer cannot store stops it
// with an error that says what to do, never silence: an empty store
// whose seq 1 the ring evicted (start at the live tail, --from-live);
// a directory of another session. A NAK below what a --from-live
// replayer holds gets Gone, and a tail that no source can serve fails
// naming the replayer.
func TestCLI_ReplayerFailsLoudly(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mc := groups(4444)
	net := udpArgs(mc)
	seqArgs := append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "94208"}, net...)
	seq, seqLines, _ := startSequencer(t, ctx, bin, seqArgs)
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, append(args, net...)...).CombinedOutput()
		return string(out), err
	}
	// A directory that surely holds this session, for the last step: a
	// replayer from seq 1 while the ring still has it (the --from-live
	// one below may store nothing if its node fails before sending,
	// which left the last step's replayer following the new session for
	// good, and the test hung until its deadline in CI).
	oldDir := t.TempDir()
	early := startReplayer(t, ctx, bin, append([]string{"--dir", oldDir, "--nak-addr", freeUDPAddr(t)}, net...))
	if out, err := run("node", "--account", "EARLY", "--count", "2000", "--rate", "5000", "--size", "200"); err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if stopped := early.stop(t); field(t, stopped, "contiguous") == 0 {
		t.Fatalf("the replayer of the first session stored nothing: %q", stopped)
	}
	dir := t.TempDir()
	nak := freeUDPAddr(t)

	// Seq 1 is gone from the ring: an empty store cannot start from it.
	cmd := exec.CommandContext(ctx, bin, append([]string{"replayer", "--dir", dir, "--nak-addr", nak}, net...)...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "unrecoverable") || !strings.Contains(string(out), "--from-live") {
		t.Fatalf("replayer of an empty store after seq 1 left the ring: %v\n%s", err, out)
	}

	// From the live tail it runs; what came before is Gone from both.
	rep := startReplayer(t, ctx, bin, append([]string{"--dir", dir, "--nak-addr", nak, "--from-live"}, net...))
	if out, err := run("node", "--account", "MORE", "--count", "300", "--rate", "5000", "--size", "200", "--replayer", nak); err == nil || !strings.Contains(out, "repair source 1") {
		// The built-in node reads from seq 1: neither source holds it.
		t.Fatalf("node from seq 1 with a --from-live replayer: %v\n%s", err, out)
	}
	stopped := rep.stop(t)
	if field(t, stopped, "gones") == 0 {
		t.Fatalf("replayer stopped line %q: want a Gone for what it never held", stopped)
	}

	// A new session on the same groups: the directory holds the old one.
	if err := seq.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for seqLines.Scan() {
	}
	_ = seq.Wait()
	startSequencer(t, ctx, bin, seqArgs)
	if out, err := run("node", "--account", "NEW", "--count", "10", "--size", "20"); err != nil {
		t.Fatalf("node of the new session: %v\n%s", err, out)
	}
	cmd = exec.CommandContext(ctx, bin, append([]string{"replayer", "--dir", oldDir, "--nak-addr", nak}, net...)...)
	out, err = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "holds session") {
		t.Fatalf("replayer of another session's directory: %v\n%s", err, out)
	}
}
