package options

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/internal/config"
)

// A key error names the flag and the variable that set the key; Keyed
// moves a package's field error onto its key.
func TestKeyError_NamesFlagAndVariable(t *testing.T) {
	err := OneOf("node.mode", "turbo", "safe", "fast")
	want := `invalid configuration: node.mode = "turbo", want one of: safe, fast (flag --node.mode, variable SEQD_NODE_MODE)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Fatalf("OneOf = %v, want %s", err, want)
	}
	field := config.New(errors.New("pkg: invalid"), "Window", 0, "1..1024")
	var ce *config.Error
	if err := Keyed(field, map[string]string{"Window": "node.window"}); !errors.As(err, &ce) || ce.Field != "node.window" {
		t.Fatalf("Keyed = %v", err)
	}
	if err := Keyed(field, nil); err != error(field) {
		t.Fatalf("Keyed with no key = %v, want the error unchanged", err)
	}
}

// A --config file with a key no flag knows is refused, naming it; a
// known key sets its flag.
func TestWithConfig_RefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	run := func(doc string) (string, error) {
		path := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		flags, before := WithConfig([]cli.Flag{String("udp.stream-group", "a", "")})
		var got string
		app := &cli.App{Flags: flags, Before: before, Action: func(c *cli.Context) error {
			got = c.String("udp.stream-group")
			return nil
		}}
		return got, app.Run([]string{"seqd", "--config", path})
	}
	if got, err := run("[udp]\nstream-group = \"b\"\n"); err != nil || got != "b" {
		t.Fatalf("known key: %q, %v", got, err)
	}
	if _, err := run("[udp]\nstream-grup = \"b\"\n"); err == nil || !strings.Contains(err.Error(), "unknown key(s) udp.stream-grup") {
		t.Fatalf("unknown key: %v", err)
	}
}
