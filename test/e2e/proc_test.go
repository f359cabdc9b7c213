package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/seqd/seqd/test/proc"
)

// The helpers below start and stop the seqd processes of these tests in
// the two ways they are read: a scanner the test reads from itself
// (startPiped), or lines a goroutine collects while the test polls them
// (lineProc). Every process is killed when its test ends.

// startPiped starts cmd with its stderr in a buffer and returns a scanner
// over its stdout. The process is killed when the test ends, if it is
// still running.
func startPiped(t *testing.T, cmd *exec.Cmd) (*bufio.Scanner, *syncBuffer) {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return bufio.NewScanner(out), stderr
}

// stopSequencer sends SIGTERM to a sequencer from startSequencer, reads
// the rest of its stdout and fails the test unless it exits 0.
func stopSequencer(t *testing.T, seq *exec.Cmd, lines *bufio.Scanner, stderr *syncBuffer) {
	t.Helper()
	if err := seq.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if err := seq.Wait(); err != nil {
		t.Fatalf("sequencer: %v\n%s", err, stderr.String())
	}
}

// runSeqd runs `seqd args...` to its end, with env added to the
// environment, and returns its stdout and stderr apart.
func runSeqd(ctx context.Context, bin string, env []string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// seqdOutput is runSeqd's stdout, followed by its stderr when it failed.
func seqdOutput(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	out, errOut, err := runSeqd(ctx, bin, env, args...)
	if err != nil {
		return out + errOut, err
	}
	return out, nil
}

// startBackground starts cmd with its stdout and stderr in one buffer;
// the channel gets its exit.
func startBackground(t *testing.T, cmd *exec.Cmd) (*syncBuffer, <-chan error) {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return out, done
}

// lineProc is a process whose stdout lines a goroutine collects while the
// test polls them (find, await), with its stderr kept (test/proc). It is
// killed when the test ends, and what it printed is logged if the test
// failed.
type lineProc struct {
	label string // "member 2", "node A": names it in failures
	*proc.Proc
	exited <-chan struct{}
}

// startLineProc starts bin args (with a pipe to its stdin if stdin is
// set); it ends with ctx. Each has a set of its own: a test kills members
// on purpose, and says itself which deaths fail it.
func startLineProc(t *testing.T, ctx context.Context, bin string, args []string, label string, stdin bool) *lineProc {
	t.Helper()
	p, err := proc.NewSet("").Start(ctx, proc.Spec{Name: label, Path: bin, Args: args, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	lp := &lineProc{label: label, Proc: p, exited: p.Exited()}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", label, tailOf(strings.Join(p.Lines(), "\n"), 3000), tailOf(p.Stderr(), 3000))
		}
	})
	return lp
}

// output is a copy of the lines printed so far.
func (p *lineProc) output() []string { return p.Lines() }

// find returns the first line (from the i-th on) matching re.
func (p *lineProc) find(re *regexp.Regexp, from int) ([]string, int) { return p.Find(re, from) }

func (p *lineProc) lineCount() int { return p.LineCount() }

// await waits for a line matching re printed at or after line from.
func (p *lineProc) await(t *testing.T, ctx context.Context, re *regexp.Regexp, from int, what string) []string {
	t.Helper()
	m, err := p.Await(ctx, re, from, what)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
