package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCLI_SecondSequencerRefused: a sequencer started on groups where
// another session is live refuses to start, naming the session and the
// group, and the running session's nodes go on; with --force it starts and
// says loudly what that does.
func TestCLI_SecondSequencerRefused(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc := groups(555)
	net := udpArgs(mc)
	const session = 4242
	startSequencer(t, ctx, bin, append([]string{"--session", fmt.Sprint(session)}, net...))

	second := exec.CommandContext(ctx, bin, append([]string{"sequencer", "--sequencer.listen-before-start", "1s"}, net...)...)
	out, err := second.CombinedOutput()
	if err == nil || second.ProcessState.ExitCode() != 1 {
		t.Fatalf("second sequencer: %v, want exit 1\n%s", err, out)
	}
	want := fmt.Sprintf("session %d is live on udp group %s on interface lo", session, mc.StreamGroup)
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "sequencer: ready") {
		t.Fatalf("second sequencer does not say %q (or started):\n%s", want, out)
	}

	// The first session still serves a node.
	nodeOut, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "STILL", "--count", "100"}, net...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(nodeOut), "acked=100 ") {
		t.Fatalf("node after the refused sequencer: %v\n%s", err, nodeOut)
	}

	// --force starts, with a loud warning.
	forced := exec.CommandContext(ctx, bin, append([]string{"sequencer", "--force"}, net...)...)
	var stderr syncBuffer
	forced.Stderr = &stderr
	stdout, err := forced.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := forced.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = forced.Process.Kill()
		_ = forced.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "sequencer: ready") {
		t.Fatalf("forced sequencer did not start: %q\n%s", sc.Text(), stderr.String())
	}
	// The warning is logged before the ready line is printed, but the two
	// come through different pipes, each copied by its own goroutine: the
	// stderr copy may still be on its way.
	loud := func(s string) bool {
		return strings.Contains(s, "level=WARN") && strings.Contains(s, "--force") && strings.Contains(s, fmt.Sprintf("live_session=%d", session))
	}
	for end := time.Now().Add(5 * time.Second); !loud(stderr.String()) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if s := stderr.String(); !loud(s) {
		t.Fatalf("forced sequencer started without a loud warning:\n%s", s)
	}
}
