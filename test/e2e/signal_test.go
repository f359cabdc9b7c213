package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLI_SIGTERMDuringStartup: a SIGTERM that arrives as soon as a seqd
// process runs its own code (right after the Go runtime initialised its
// packages, before any configuration is read or socket opened) ends it
// gracefully: never killed by the signal (status 143), and with the
// documented status and final line of each subcommand.
//
// The child runs with GODEBUG=inittrace=1, which prints "init main @..."
// once every package, main's included, is initialised: the signal goes
// the moment that line appears.
func TestCLI_SIGTERMDuringStartup(t *testing.T) {
	bin := seqd(t)
	for i, tc := range []struct {
		cmd      string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"sequencer", nil, 0, "sequencer: stopped"},
		{"node", []string{"--account", "SIG"}, 2, "node: stopped account=SIG"},
		{"tail", nil, 0, ""},
	} {
		for round := range 4 {
			mc := groups(uint64(1000 + 10*i + round))
			args := append(append([]string{tc.cmd}, udpArgs(mc)...), tc.args...)
			code, out, stderr := runSignalledAtStart(t, bin, args)
			if code != tc.wantCode {
				t.Errorf("%s round %d: exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.cmd, round, code, tc.wantCode, out, stderr)
				break
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("%s round %d: stdout lacks %q:\n%s", tc.cmd, round, tc.wantOut, out)
				break
			}
		}
	}
}

// runSignalledAtStart starts bin, sends SIGTERM as soon as main is about
// to run, and returns the exit status (128+signal if killed by one).
func runSignalledAtStart(t *testing.T, bin string, args []string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stdout syncBuffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	mainInit := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(errPipe)
		seen := false
		for sc.Scan() {
			l := sc.Text()
			if !seen && strings.HasPrefix(l, "init main @") {
				seen = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
				close(mainInit)
			}
			if !strings.HasPrefix(l, "init ") {
				fmt.Fprintln(&stderr, l)
			}
		}
	}()
	select {
	case <-mainInit:
	case <-ctx.Done():
		t.Fatalf("%v: no init trace", args)
	}
	<-copied
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	st := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if st.Signaled() {
		return 128 + int(st.Signal()), stdout.String(), stderr.String()
	}
	return st.ExitStatus(), stdout.String(), stderr.String()
}
