package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLI_Logger: `seqd logger --format json` beside a sequencer writes
// every command a node sent, once and in order, to rotated files in its
// directory, and exits 0 on SIGTERM with its buffers written.
func TestCLI_Logger(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := udpArgs(groups(131))
	startSequencer(t, ctx, bin, net)
	dir := t.TempDir()
	lg := exec.CommandContext(ctx, bin, append([]string{"logger", "--dir", dir, "--format", "json", "--from", "1",
		"--internal=false", "--max-file-bytes", "8192"}, net...)...)
	out, done := startBackground(t, lg)
	time.Sleep(200 * time.Millisecond)

	const count = 300
	nout, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "LOG", "--count", fmt.Sprint(count), "--size", "16"}, net...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(nout), fmt.Sprintf("acked=%d", count)) {
		t.Fatalf("node: %v\n%s", err, nout)
	}
	// The logger holds them within a flush (200 ms); then SIGTERM.
	time.Sleep(500 * time.Millisecond)
	if err := lg.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("logger after SIGTERM: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("logger: stopped lines=%d ", count)) {
		t.Fatalf("logger output:\n%s", out.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "seqd-*.jsonl"))
	if len(files) < 2 {
		t.Fatalf("files %v: want the log rotated at 8 KiB", files)
	}
	var n int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 8192 {
			t.Errorf("%s: %d bytes, above --max-file-bytes", f, len(b))
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m struct {
				Account string `json:"account"`
				CmdSeq  int    `json:"cmd_seq"`
				Size    int    `json:"size"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			n++
			if m.Account != "LOG" || m.CmdSeq != n || m.Size != 16 {
				t.Fatalf("%s: line %d: %q", f, n, l)
			}
		}
	}
	if n != count {
		t.Fatalf("%d lines in the files, want %d", n, count)
	}
}
