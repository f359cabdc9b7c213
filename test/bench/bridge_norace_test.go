//go:build !race

package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A million messages cross a bridge pair and site B's stream equals site
// A's (`make integration`: tens of seconds of processes; not under -race).
func TestBenchBridge_MillionAcross(t *testing.T) {
	if testing.Short() {
		t.Skip("a million messages across a bridge")
	}
	bin := filepath.Join(t.TempDir(), "seqd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/seqd/seqd/cmd/seqd").CombinedOutput(); err != nil {
		t.Fatalf("build seqd: %v\n%s", err, out)
	}
	cfg := DefaultConfig()
	cfg.Mode, cfg.Count, cfg.Nodes, cfg.Exe = "bridge", 1_000_000, 1, bin
	var out bytes.Buffer
	cfg.Out = &out
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	line := out.String()
	if !strings.HasPrefix(line, "bench transport=udp mode=bridge ") || !strings.Contains(line, " streams_equal=true ") {
		t.Fatalf("line %q", line)
	}
	if r, err := field(line, "ratio"); err != nil || r <= 0 {
		t.Fatalf("ratio %v (%v)", r, err)
	}
}
