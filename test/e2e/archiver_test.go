package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLI_ArchiverShipsOnceAndReplays: `seqd archiver --once` ships a
// finished session to DEST/SESSION, a second run ships nothing, and
// `seqd replay` runs the copy as it runs the original.
func TestCLI_ArchiverShipsOnceAndReplays(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, _ := writeSessionArchive(t, 400)
	dest := t.TempDir()
	args := []string{"archiver", "--from", src, "--to", dest, "--settle", "0s", "--once"}
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "archiver: shipped session=1092 ") || !strings.Contains(string(out), "verified=sha256") {
		t.Fatalf("archiver: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "shipped") {
		t.Fatalf("second archiver run: %v (want rc 0 and nothing shipped)\n%s", err, out)
	}
	orig, err := exec.CommandContext(ctx, bin, "replay", "--quiet", src).Output()
	if err != nil {
		t.Fatalf("replay of the source: %v", err)
	}
	cp, err := exec.CommandContext(ctx, bin, "replay", "--quiet", filepath.Join(dest, "1092")).Output()
	if err != nil {
		t.Fatalf("replay of the copy: %v", err)
	}
	norm := func(b []byte) string { // the summary ends with timings
		s, _, _ := strings.Cut(string(b), " elapsed=")
		return s
	}
	if norm(orig) != norm(cp) || !strings.Contains(string(orig), "first=1 last=406 ") {
		t.Fatalf("replays differ:\nsource: %s\ncopy:   %s", orig, cp)
	}
}
