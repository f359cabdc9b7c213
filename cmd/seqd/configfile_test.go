package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runApp runs seqd in-process with args and returns its error text.
func runApp(t *testing.T, args ...string) string {
	t.Helper()
	err := newApp().Run(append([]string{"seqd"}, args...))
	if err == nil {
		return ""
	}
	return err.Error()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readmeTOML is the README's configuration sample.
func readmeTOML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```toml\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no ```toml sample")
	}
	return string(m[1])
}

// TestConfigFile_READMESampleServesEveryProcess: the README's one file
// (sections of the sequencer, the node, the transport) is accepted by
// every subcommand that reads a file; each ignores the keys of the
// others (they were refused as unknown). Each run is stopped by a bad
// flag the subcommand checks after loading the file, so a config error
// would show instead.
func TestConfigFile_READMESampleServesEveryProcess(t *testing.T) {
	cfg := writeFile(t, "seqd.toml", readmeTOML(t))
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string // the error after loading; "" for none
	}{
		{[]string{"sequencer", "--config", cfg, "--dry-run"}, ""},
		{[]string{"sequencer", "--config", cfg, "--cluster", "--id", "1", "--dir", dir, "--peers", "1@127.0.0.1:1@127.0.0.1:2@127.0.0.1:3", "--dry-run"}, ""},
		{[]string{"replayer", "--config", cfg, "--dir", dir, "--dry-run"}, ""},
		{[]string{"node", "--config", cfg, "--size", "-1"}, "size = -1"},
		{[]string{"tail", "--config", cfg, "--format", "xml"}, `format = "xml"`},
		{[]string{"replay", "--config", cfg, "--format", "xml", dir}, `format = "xml"`},
	} {
		got := runApp(t, tc.args...)
		if strings.Contains(got, cfg) || tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("seqd %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// TestConfigFile_TyposAndTypesAreNamed: a key no subcommand knows is
// refused even in a section of another subcommand; a value of the wrong
// type is reported with the file, the key, the value and what is wanted.
func TestConfigFile_TyposAndTypesAreNamed(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"[node]\nwindw = 5\n", []string{"unknown key(s) node.windw"}},
		{"[sequencer]\nring-byts = 5\n", []string{"unknown key(s) sequencer.ring-byts"}},
		{"[udp]\nttl = \"one\"\n", []string{"bad.toml", `udp.ttl = "one"`, "want an integer", "--udp.ttl"}},
		{"[sequencer]\nheartbeat-interval = 5\n", []string{"bad.toml", "sequencer.heartbeat-interval = 5", "duration"}},
	} {
		cfg := writeFile(t, "bad.toml", tc.text)
		got := runApp(t, "sequencer", "--config", cfg, "--dry-run")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: %q, want it to contain %q", tc.text, got, w)
			}
		}
	}
}

// TestConfigError_RangesNameKeys: a range that depends on another field
// names that field's key, not its Go name.
func TestConfigError_RangesNameKeys(t *testing.T) {
	got := runApp(t, "sequencer", "--sequencer.ring-bytes", "100", "--dry-run")
	if !strings.Contains(got, "2*sequencer.max-packet-bytes") || strings.Contains(got, "MaxPacketBytes") {
		t.Fatalf("%q: want the range in keys (2*sequencer.max-packet-bytes)", got)
	}
}
