package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
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
		warnUnauthenticated(cmd)
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
