package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLI_StrayArgumentsRefused: a positional argument is a mistake in
// every subcommand (`--internal false` would set --internal and drop
// "false" and every option after it); it fails at once, naming it.
func TestCLI_StrayArgumentsRefused(t *testing.T) {
	bin := seqd(t)
	for _, args := range [][]string{
		{"tail", "--internal", "false", "--count", "1"},
		{"node", "--account", "A", "extra"},
		{"sequencer", "--dry-run", "oops"},
		{"bench", "now"},
		{"demo", "x"},
	} {
		// Old seqd ran these (a tail, a node) until killed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%v: exit %d (%v), want 1\n%s", args, cmd.ProcessState.ExitCode(), err, out)
			continue
		}
		if !strings.Contains(string(out), "unexpected argument(s)") {
			t.Errorf("%v: error does not name the stray argument:\n%s", args, out)
		}
	}
}

// TestCLI_ErrorsPrintedOnce: an error is printed once, on one line, with
// one "seqd:" prefix and no repeated prefix ("node: node:"), and without
// the help text around it.
func TestCLI_ErrorsPrintedOnce(t *testing.T) {
	bin := seqd(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"node", "--account", "A", "--count", "1", "--timeout", "300ms", "--transport", "tcp", "--tcp.addr", "127.0.0.1:1"}, "connection refused"},
		{[]string{"node", "--account", "much-too-long"}, "account = "},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cmd := exec.CommandContext(ctx, bin, tc.args...)
		out, _ := cmd.CombinedOutput()
		cancel()
		s := string(out)
		if cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%v: exit %d, want 1\n%s", tc.args, cmd.ProcessState.ExitCode(), s)
		}
		var errLines []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			if strings.HasPrefix(l, "seqd:") {
				errLines = append(errLines, l)
			}
		}
		if len(errLines) != 1 || !strings.Contains(errLines[0], tc.want) {
			t.Errorf("%v: want one \"seqd:\" line saying %q, got:\n%s", tc.args, tc.want, s)
			continue
		}
		if strings.Count(s, tc.want) != 1 || strings.Contains(s, "USAGE:") {
			t.Errorf("%v: error printed more than once or with the help:\n%s", tc.args, s)
		}
		if m := repeatedPrefix(errLines[0]); m != "" {
			t.Errorf("%v: repeated prefix %q in %q", tc.args, m, errLines[0])
		}
	}
}

// TestCLI_TransportHelpPerCommand: --transport offers only what each
// subcommand accepts (hybrid is the sequencer's alone).
func TestCLI_TransportHelpPerCommand(t *testing.T) {
	bin := seqd(t)
	for _, tc := range []struct {
		cmd    string
		hybrid bool
	}{{"sequencer", true}, {"node", false}, {"tail", false}} {
		out, err := exec.Command(bin, tc.cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", tc.cmd, err, out)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "--transport ") {
				line = l
			}
		}
		if strings.Contains(line, "hybrid") != tc.hybrid {
			t.Errorf("%s: --transport help %q, hybrid offered: %v, want %v", tc.cmd, line, !tc.hybrid, tc.hybrid)
		}
	}
}

// repeatedPrefix returns a one-word "prefix:" that occurs twice in line.
func repeatedPrefix(line string) string {
	seen := map[string]bool{}
	for _, part := range strings.Split(line, ": ") {
		if part == "" || strings.ContainsAny(part, " \"") {
			continue
		}
		if seen[part] {
			return part + ":"
		}
		seen[part] = true
	}
	return ""
}
