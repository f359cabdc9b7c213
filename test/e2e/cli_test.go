package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	seqdBin   string
	buildErr  error
)

// seqd builds the binary once per test run.
func seqd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seqd-e2e")
		if err != nil {
			buildErr = err
			return
		}
		seqdBin = filepath.Join(dir, "seqd")
		out, err := exec.Command("go", "build", "-o", seqdBin, "github.com/seqd/seqd/cmd/seqd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build seqd: %v", buildErr)
	}
	return seqdBin
}

// startSequencer runs `seqd sequencer` and returns once it printed its
// ready line, with the scanner of the rest of its stdout and its stderr.
// The process is killed when the test ends, if it is still running.
func startSequencer(t *testing.T, ctx context.Context, bin string, args []string) (*exec.Cmd, *bufio.Scanner, *syncBuffer) {
	t.Helper()
	seq := exec.CommandContext(ctx, bin, append([]string{"sequencer"}, args...)...)
	lines, stderr := startPiped(t, seq)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "sequencer: ready") {
		t.Fatalf("sequencer did not start: %q\n%s", lines.Text(), stderr.String())
	}
	return seq, lines, stderr
}

// TestCLI_ConfigErrorsNameTheKey: bad configuration fails at start with
// the key, the allowed values and exit code 1.
func TestCLI_ConfigErrorsNameTheKey(t *testing.T) {
	bin := seqd(t)
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[udp]\nstrem-group = \"239.1.1.1:9\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"node", "--node.mode", "turbo"}, "", `invalid configuration: node.mode = "turbo", want one of: safe, fast (flag --node.mode, variable SEQD_NODE_MODE)`},
		{[]string{"sequencer", "--dry-run", "--transport", "carrier-pigeon"}, "", `transport = "carrier-pigeon", want one of: udp, tcp, hybrid`},
		{[]string{"sequencer", "--dry-run", "--config", bad}, "", "unknown key(s) udp.strem-group"},
		{[]string{"sequencer", "--dry-run"}, "SEQD_SEQUENCER_HEARTBEAT_INTERVAL=0s", "sequencer.heartbeat-interval = 0s, want 1µs..1m"},
		{[]string{"sequencer", "--dry-run", "--udp.stream-group", "10.0.0.1:9100"}, "", `udp.stream-group = "10.0.0.1:9100", want a multicast address`},
		{[]string{"node", "--account", "much-too-long"}, "", `account = "much-too-long", want 1..8 printable ASCII bytes`},
		{[]string{"tail", "--format", "xml"}, "", `format = "xml", want one of: text, json`},
		{[]string{"sequencer"}, "SEQD_FAULTS=loss=2", "SEQD_FAULTS"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
			t.Errorf("%v: exit %d (%v), want 1\n%s", tc.args, code, err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: error does not say %q:\n%s", tc.args, tc.want, out)
		}
	}
}

// TestCLI_ConfigPrecedence: flag beats environment beats file beats default.
func TestCLI_ConfigPrecedence(t *testing.T) {
	bin := seqd(t)
	file := filepath.Join(t.TempDir(), "seqd.toml")
	if err := os.WriteFile(file, []byte("transport = \"tcp\"\n[sequencer]\nheartbeat-interval = \"5ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env string, args ...string) string {
		cmd := exec.Command(bin, append([]string{"sequencer", "--dry-run", "--config", file}, args...)...)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"X=1", nil, "heartbeat_interval=5ms"},
		{"SEQD_SEQUENCER_HEARTBEAT_INTERVAL=7ms", nil, "heartbeat_interval=7ms"},
		{"SEQD_SEQUENCER_HEARTBEAT_INTERVAL=7ms", []string{"--sequencer.heartbeat-interval", "9ms"}, "heartbeat_interval=9ms"},
	} {
		out := run(tc.env, tc.args...)
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "transport=tcp") {
			t.Errorf("env %s args %v: got %q, want %s and transport=tcp from the file", tc.env, tc.args, out, tc.want)
		}
	}
}

// TestCLI_SequencerNodeTail: real processes over UDP multicast with 5%
// loss at the node: the node exits 0 once all its commands are acked, the
// JSON tail prints every command with the documented keys, and the
// sequencer stops gracefully on SIGTERM.
func TestCLI_SequencerNodeTail(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc := groups(99)
	net := udpArgs(mc)

	seq, lines, seqErr := startSequencer(t, ctx, bin, net)

	const count = 500
	tail := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json", "--from", "1", "--internal=false", "--count", fmt.Sprint(count)}, net...)...)
	var tailOut, tailErr bytes.Buffer
	tail.Stdout, tail.Stderr = &tailOut, &tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	nodeCmd := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "CLI", "--count", fmt.Sprint(count), "--size", "100"}, net...)...)
	nodeCmd.Env = append(os.Environ(), "SEQD_FAULTS=loss=0.05,seed=11")
	out, err := nodeCmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("node: ok account=CLI sent=%d acked=%d", count, count)) {
		t.Fatalf("node result:\n%s", out)
	}
	if err := tail.Wait(); err != nil {
		t.Fatalf("tail: %v\n%s", err, tailErr.String())
	}
	var n int
	for _, l := range strings.Split(strings.TrimSpace(tailOut.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		for _, k := range []string{"seq", "epoch", "time", "account", "instance", "cmd_seq", "size", "crc"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("tail line %q lacks %q", l, k)
			}
		}
		n++
		if m["account"] != "CLI" || m["cmd_seq"].(float64) != float64(n) || m["size"].(float64) != 100 {
			t.Fatalf("tail line %d: %q", n, l)
		}
	}
	if n != count {
		t.Fatalf("tail printed %d commands, want %d", n, count)
	}

	if err := seq.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var stopped string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "sequencer: stopped") {
			stopped = lines.Text()
		}
	}
	if err := seq.Wait(); err != nil {
		t.Fatalf("sequencer exit after SIGTERM: %v\n%s", err, seqErr.String())
	}
	if !strings.Contains(stopped, fmt.Sprintf("commands=%d", count)) {
		t.Fatalf("sequencer final line %q", stopped)
	}
}

// TestCLI_NodeKilledAndRestarted: a node killed with SIGKILL mid-run and
// started again announces a new incarnation, numbers its commands from 1,
// rewinds through its previous life without counting it as its own, and
// finishes; the stream holds each life's commands once and in order.
func TestCLI_NodeKilledAndRestarted(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc := groups(123)
	net := udpArgs(mc)
	startSequencer(t, ctx, bin, net)

	// One tail reads the whole stream from seq 1: it shows when the first
	// life has commands in the stream (the moment to kill it, whatever the
	// machine's load), and at the end, both lives.
	tail := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json", "--from", "1"}, net...)...)
	var tailOut syncBuffer
	tail.Stdout = &tailOut
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = tail.Process.Signal(syscall.SIGTERM)
		_ = tail.Wait()
	}()

	first := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "PHOENIX", "--count", "1000000", "--rate", "20000", "--size", "64"}, net...)...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	const killAfter = 200
	for lives := phoenixLives(t, tailOut.String()); len(lives) == 0 || lives[0] < killAfter; lives = phoenixLives(t, tailOut.String()) {
		if ctx.Err() != nil {
			t.Fatalf("the first life never had %d commands in the stream: %v", killAfter, lives)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	const again = 2000
	out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "PHOENIX", "--count", fmt.Sprint(again), "--size", "64"}, net...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("restarted node: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("acked=%d ", again)) {
		t.Fatalf("restarted node result:\n%s", out)
	}

	// The whole stream: two lives, each numbered from 1, each command
	// once, the second life complete.
	var lives []int
	for {
		lives = phoenixLives(t, tailOut.String())
		if len(lives) == 2 && lives[1] == again || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(lives) != 2 || lives[0] == 0 || lives[1] != again {
		t.Fatalf("lives in the stream: %v, want two, the second with %d commands", lives, again)
	}
	t.Logf("first life: %d commands before SIGKILL; second: %d", lives[0], lives[1])
}

// phoenixLives reads a JSON tail: the commands of PHOENIX per incarnation,
// failing the test if one is out of order within its life.
func phoenixLives(t *testing.T, out string) []int {
	t.Helper()
	var lives []int
	next := uint64(1)
	for _, l := range strings.Split(out, "\n") {
		var m struct {
			Account string `json:"account"`
			CmdSeq  uint64 `json:"cmd_seq"`
			Type    string `json:"type"`
		}
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch {
		case m.Type == "incarnation" && m.Account == "PHOENIX":
			lives = append(lives, 0)
			next = 1
		case m.Account == "PHOENIX" && m.Type == "":
			if m.CmdSeq != next || len(lives) == 0 {
				t.Fatalf("command %d of PHOENIX where %d was due (life %d)", m.CmdSeq, next, len(lives))
			}
			next++
			lives[len(lives)-1]++
		}
	}
	return lives
}

// syncBuffer is a bytes.Buffer that a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
