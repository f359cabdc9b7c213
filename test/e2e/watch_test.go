package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLI_WarnsWhenNoSequencer: a node or tail pointed at a group with no
// sequencer says so (a WARN naming the group and interface) instead of
// waiting in silence until its timeout.
func TestCLI_WarnsWhenNoSequencer(t *testing.T) {
	bin := seqd(t)
	mc := groups(77)
	net := udpArgs(mc)
	for _, args := range [][]string{
		{"node", "--account", "LONELY", "--timeout", "3s", "--stream-warn-after", "300ms"},
		{"tail", "--stream-warn-after", "300ms"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, append(args, net...)...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the warning (the tail would run until stopped).
		warned := func() bool {
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(l, "level=WARN") && strings.Contains(l, "no stream from a sequencer") &&
					strings.Contains(l, mc.StreamGroup) && strings.Contains(l, "interface lo") {
					return true
				}
			}
			return false
		}
		for !warned() && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cancel()
		if !warned() {
			t.Errorf("%s: no warning naming %s on lo:\n%s", args[0], mc.StreamGroup, stderr.String())
		}
	}
}
