package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLI_LateNodeWithoutReplayerFailsBeforeSending: a seqd node started
// after the sequencer's ring dropped seq 1, with no --replayer, fails
// before it sends a command, and the error names --replayer and --rewind
// (it sent its commands, then died with "unrecoverable gap").
func TestCLI_LateNodeWithoutReplayerFailsBeforeSending(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := udpArgs(groups(77))
	startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "16384"}, net...))
	// Fill the ring past seq 1.
	first := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "EARLY", "--count", "400", "--size", "200"}, net...)...)
	if out, err := first.CombinedOutput(); err != nil {
		t.Fatalf("first node: %v\n%s", err, out)
	}
	late := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "LATE", "--count", "5", "--timeout", "20s"}, net...)...)
	out, err := late.CombinedOutput()
	if err == nil {
		t.Fatalf("late node succeeded:\n%s", out)
	}
	for _, w := range []string{"--replayer", "--rewind", "acked 0 of 5", "no longer"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("late node's error lacks %q:\n%s", w, out)
		}
	}
}
