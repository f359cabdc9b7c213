package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/wire"
)

// TestWarnUnauthenticated: a long-running process logs one WARN line
// naming docs/security.md before it runs (not with --dry-run); a client
// command logs none.
func TestWarnUnauthenticated(t *testing.T) {
	var buf bytes.Buffer
	old := warnLogger
	warnLogger = func(*cli.Context) *slog.Logger { return slog.New(slog.NewTextHandler(&buf, nil)) }
	defer func() { warnLogger = old }()
	for _, tt := range []struct {
		name string
		args []string
		want int
	}{
		{"tail", nil, 1},
		{"sequencer", []string{"--dry-run"}, 0},
		{"replay", nil, 0},
	} {
		buf.Reset()
		cmd := &cli.Command{Name: tt.name, Flags: []cli.Flag{&cli.BoolFlag{Name: "dry-run"}}, Action: func(*cli.Context) error { return nil }}
		withSecurity(cmd)
		app := &cli.App{Name: "seqd", Commands: []*cli.Command{cmd}}
		if err := app.Run(append([]string{"seqd", tt.name}, tt.args...)); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), "WITHOUT AUTHENTICATION"); n != tt.want || n > 0 && !strings.Contains(buf.String(), "docs/security.md") {
			t.Fatalf("seqd %s %v logged %q, want %d WARN naming docs/security.md", tt.name, tt.args, buf.String(), tt.want)
		}
	}
	for _, cmd := range newApp().Commands {
		if unauthenticated[cmd.Name] && cmd.Before == nil {
			t.Fatalf("seqd %s has no Before: it does not warn", cmd.Name)
		}
	}
}

// keysApp is a bare `seqd tail` with the security keys, whose action
// only records whether it ran with an Auth.
func keysApp(t *testing.T, name string, gotAuth *bool) *cli.App {
	t.Helper()
	flags := append(securityFlags(), &cli.BoolFlag{Name: "dry-run"}, &cli.StringFlag{Name: "transport", Value: "udp"},
		&cli.StringFlag{Name: "account"}, &cli.BoolFlag{Name: "read-only"})
	cmd := &cli.Command{Name: name, Flags: flags, Action: func(c *cli.Context) error {
		*gotAuth = processAuth(c) != nil
		return nil
	}}
	withSecurity(cmd)
	return &cli.App{Name: "seqd", Commands: []*cli.Command{cmd}, Writer: io.Discard}
}

func runKeygen(t *testing.T, args ...string) error {
	t.Helper()
	app := &cli.App{Name: "seqd", Commands: []*cli.Command{keygenCommand()}, Writer: io.Discard}
	return app.Run(append([]string{"seqd", "keygen"}, args...))
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "stream.keys")
	if err := runKeygen(t, "--out", out); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("keys file mode %04o, want 0600", st.Mode().Perm())
	}
	first, _ := os.ReadFile(out)
	err = runKeygen(t, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "exists: --force overwrites it") {
		t.Fatalf("keygen over an existing file: %v, want a refusal naming --force", err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(again, first) {
		t.Fatal("a refused keygen changed the file")
	}
	if err := runKeygen(t, "--out", out, "--id", "2", "--append"); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(t, "--out", out, "--id", "2", "--append"); err == nil || !strings.Contains(err.Error(), "already holds key id 2") {
		t.Fatalf("appending id 2 twice: %v", err)
	}
	keys, err := readKeysFile(out, wire.KeyStream)
	if err != nil || len(keys) != 2 || keys[0].ID != 1 || keys[1].ID != 2 || keys[0].Secret == keys[1].Secret {
		t.Fatalf("after a rotation: %+v, %v; want keys 1 and 2, different secrets", keys, err)
	}
	if err := runKeygen(t, "--out", out, "--force", "--class", "command:alice", "--id", "7"); err != nil {
		t.Fatal(err)
	}
	if keys, err := readKeysFile(out, wire.KeyCommand); err != nil || len(keys) != 1 || keys[0].Name() != "command:alice" {
		t.Fatalf("after --force: %+v, %v", keys, err)
	}
	if err := runKeygen(t, "--out", filepath.Join(dir, "x"), "--class", "foo"); err == nil || !strings.Contains(err.Error(), `class "foo"`) {
		t.Fatalf("--class foo: %v", err)
	}
}

// TestSecurity_StartupErrors: a missing, open or wrong keys
// file stops the process at start with an error naming the key and the
// file; with keys the WARN is gone, without them it is there.
func TestSecurity_StartupErrors(t *testing.T) {
	var buf bytes.Buffer
	old := warnLogger
	warnLogger = func(*cli.Context) *slog.Logger { return slog.New(slog.NewTextHandler(&buf, nil)) }
	defer func() { warnLogger = old }()
	dir := t.TempDir()
	stream := filepath.Join(dir, "stream.keys")
	if err := runKeygen(t, "--out", stream); err != nil {
		t.Fatal(err)
	}
	member := filepath.Join(dir, "member.keys")
	if err := runKeygen(t, "--out", member, "--class", "member"); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.keys")
	b, _ := os.ReadFile(stream)
	os.WriteFile(open, b, 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string // "" runs with keys
	}{
		{"tail", []string{"--security.stream-key-file", filepath.Join(dir, "none.keys")}, `security: --security.stream-key-file "` + dir + `/none.keys": stat ` + dir + `/none.keys: no such file or directory`},
		{"tail", []string{"--security.stream-key-file", open}, "keys file is readable or writable by others (mode 0644): chmod 600 it"},
		{"tail", []string{"--security.stream-key-file", member}, "key 1 is member, this file holds stream keys only"},
		{"sequencer", []string{"--security.stream-key-file", stream}, "seqd sequencer with authentication on needs --security.command-keys-file too"},
		{"node", []string{"--security.stream-key-file", stream, "--account", "alice"}, "seqd node --account alice sends commands: --security.command-keys-file must hold command:alice or command:*"},
		{"tail", []string{"--security.stream-key-file", stream, "--transport", "tcp"}, ""},
		{"tail", []string{"--security.stream-key-file", stream}, ""},
	} {
		buf.Reset()
		var gotAuth bool
		err := keysApp(t, c.name, &gotAuth).Run(append([]string{"seqd", c.name}, c.args...))
		if c.want == "" {
			if err != nil || !gotAuth {
				t.Fatalf("%s %v: %v, auth %v", c.name, c.args, err, gotAuth)
			}
			if strings.Contains(buf.String(), "WITHOUT AUTHENTICATION") {
				t.Fatalf("%s with keys still warned: %s", c.name, buf.String())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s %v: %v, want an error with %q", c.name, c.args, err, c.want)
		}
	}
	buf.Reset()
	var gotAuth bool
	if err := keysApp(t, "tail", &gotAuth).Run([]string{"seqd", "tail"}); err != nil || gotAuth {
		t.Fatalf("tail without keys: %v, auth %v", err, gotAuth)
	}
	if !strings.Contains(buf.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("tail without keys did not warn: %q", buf.String())
	}
}
