package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
// test polls them (find, await), with its stderr kept. It is killed when
// the test ends, and what it printed is logged if the test failed.
type lineProc struct {
	label  string // "member 2", "node A": names it in failures
	cmd    *exec.Cmd
	stdin  io.WriteCloser // nil unless asked for
	mu     sync.Mutex
	lines  []string
	stderr *syncBuffer
	exited chan struct{}
}

// startLineProc starts cmd (with a pipe to its stdin if stdin is set).
func startLineProc(t *testing.T, cmd *exec.Cmd, label string, stdin bool) *lineProc {
	t.Helper()
	p := &lineProc{label: label, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", p.label, tailOf(strings.Join(p.output(), "\n"), 3000), tailOf(p.stderr.String(), 3000))
		}
	})
	return p
}

// output is a copy of the lines printed so far.
func (p *lineProc) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// find returns the first line (from the i-th on) matching re.
func (p *lineProc) find(re *regexp.Regexp, from int) ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		if m := re.FindStringSubmatch(p.lines[i]); m != nil {
			return m, i
		}
	}
	return nil, len(p.lines)
}

func (p *lineProc) lineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// await waits for a line matching re printed at or after line from.
func (p *lineProc) await(t *testing.T, ctx context.Context, re *regexp.Regexp, from int, what string) []string {
	t.Helper()
	for ctx.Err() == nil {
		if m, _ := p.find(re, from); m != nil {
			return m
		}
		select {
		case <-p.exited:
			if m, _ := p.find(re, from); m != nil {
				return m
			}
			t.Fatalf("%s exited before %s", p.label, what)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("%s: no %s", p.label, what)
	return nil
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
