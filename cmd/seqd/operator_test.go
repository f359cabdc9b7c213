package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runOut runs seqd in-process and returns what it wrote and its error.
func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	// urfave/cli's completion reads os.Args, not the arguments of Run.
	saved := os.Args
	os.Args = append([]string{"seqd"}, args...)
	defer func() { os.Args = saved }()
	var b bytes.Buffer
	app.Writer, app.ErrWriter = &b, &b
	err := app.Run(append([]string{"seqd"}, args...))
	return b.String(), err
}

// TestCLI_TypoSuggestsASubcommand: a typo'd subcommand exits non-zero
// with the nearest name (it said "No help topic" before).
func TestCLI_TypoSuggestsASubcommand(t *testing.T) {
	for typo, want := range map[string]string{"sequencr": `did you mean "sequencer"`, "replayr": `did you mean "replayer"`, "tial": `did you mean "tail"`, "xyzzy": "is not a seqd subcommand"} {
		_, err := runOut(t, typo)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "No help topic") {
			t.Errorf("seqd %s: %v, want an error containing %q", typo, err, want)
		}
	}
}

// TestCLI_EveryHelpHasAnExample: every visible subcommand's --help shows
// an example command line.
func TestCLI_EveryHelpHasAnExample(t *testing.T) {
	var walk func(cmds []*cli.Command, path string)
	walk = func(cmds []*cli.Command, path string) {
		for _, cmd := range cmds {
			p := strings.TrimSpace(path + " " + cmd.Name)
			if cmd.Hidden {
				continue
			}
			if len(cmd.Subcommands) > 0 {
				walk(cmd.Subcommands, p)
				if cmd.Name != "config" && cmd.Name != "drill" {
					continue
				}
			}
			if len(cmd.Subcommands) > 0 {
				continue
			}
			out, err := runOut(t, append(strings.Fields(p), "--help")...)
			// An example is a line "seqd PATH ..." below "Examples:"
			// (the usage line alone does not count).
			_, ex, ok := strings.Cut(out, "Examples:\n")
			if err != nil || !ok || !strings.Contains(ex, "seqd "+p+" ") {
				t.Errorf("seqd %s --help has no example (add one to examples in operator.go) (%v):\n%s", p, err, out)
			}
		}
	}
	walk(newApp().Commands, "")
}

// TestCLI_VersionAndCompletion: --version names the module version;
// completion prints a script for bash and zsh and refuses other shells;
// the completion hook lists the subcommands and a subcommand's flags.
func TestCLI_VersionAndCompletion(t *testing.T) {
	out, err := runOut(t, "--version")
	if err != nil || !strings.HasPrefix(out, "seqd version ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q %v", out, err)
	}
	if _, err := runOut(t, "completion", "fish"); err == nil {
		t.Fatal("completion fish: no error")
	}
	out, err = runOut(t, "--generate-bash-completion")
	if err != nil || !strings.Contains(out, "sequencer\n") || !strings.Contains(out, "replayer\n") {
		t.Fatalf("completion of the subcommands: %q %v", out, err)
	}
	out, err = runOut(t, "node", "--acc", "--generate-bash-completion")
	if err != nil || strings.TrimSpace(out) != "--account" {
		t.Fatalf("completion of node --acc: %q %v", out, err)
	}
}

// TestNode_NegativeCountsRefused: --count, --rate and --expect below 0
// are configuration errors naming the key (they were accepted).
func TestNode_NegativeCountsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--account", "A", "--timeout", "1s", "--count", "-5"}, "count = -5"},
		{[]string{"node", "--account", "A", "--timeout", "1s", "--rate", "-1"}, "rate = -1"},
		{[]string{"node", "--account", "A", "--timeout", "1s", "--expect", "-1"}, "expect = -1"},
		{[]string{"tail", "--count", "-1"}, "count = -1"},
		// Nothing to wait for: it exited 0 at once, with no sequencer.
		{[]string{"node", "--read-only", "--timeout", "1s"}, "expect = 0, want >= 1 with --read-only"},
		{[]string{"node", "--account", "A", "--count", "0", "--timeout", "1s"}, "expect = 0, want >= 1 with --count 0"},
	} {
		_, err := runOut(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("seqd %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCLI_LogFlagsGlobalOrPerSubcommand: --log-format and --log-level are
// checked where they are given, before the subcommand's name or after it.
func TestCLI_LogFlagsGlobalOrPerSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "loud", "tail"}, `log-level = "loud"`},
		{[]string{"--log-format", "xml", "replay", "/nonexistent"}, `log-format = "xml"`},
		{[]string{"tail", "--log-format", "xml"}, `log-format = "xml"`},
		{[]string{"node", "--log-level", "trace"}, `log-level = "trace"`},
	} {
		_, err := runOut(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("seqd %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
