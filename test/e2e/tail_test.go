package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCLI_TailFrom: `seqd tail` starts at the live tail by default;
// --from N rewinds from seq N while the sequencer's ring holds it, and
// fails naming the seqs when it no longer does. Internal records name the
// sender they are about (account, instance) and their type.
func TestCLI_TailFrom(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mc := groups(321)
	net := udpArgs(mc)
	// A ring of 64 small packets: seq 1 is long gone after 2000 commands
	// (sent at a rate that lets the node's own repairs keep up).
	startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "94208"}, net...))

	runNode := func(account string, args ...string) uint64 {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, append(append([]string{"node", "--account", account, "--size", "200"}, args...), net...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("node %s: %v\n%s", account, err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "last_seq="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n
			}
		}
		t.Fatalf("node %s: no last_seq in\n%s", account, out)
		return 0
	}
	tail := func(args ...string) ([]map[string]any, string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{"tail", "--format", "json"}, args...), net...)...)
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var msgs []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				msgs = append(msgs, m)
			}
		}
		return msgs, stderr.String(), err
	}

	// A first sender: its incarnation record names it.
	late := runNode("LATE", "--count", "1", "--instance", "3")
	msgs, stderr, err := tail("--from", "1", "--count", fmt.Sprint(late))
	if err != nil || len(msgs) != int(late) {
		t.Fatalf("tail --from 1: %v %v\n%s", err, msgs, stderr)
	}
	var inc map[string]any
	for _, m := range msgs {
		if m["type"] == "incarnation" {
			inc = m
		}
	}
	if inc == nil || inc["internal"] != true || inc["account"] != "LATE" || inc["instance"].(float64) != 3 {
		t.Fatalf("LATE's incarnation record: %v in %v", inc, msgs)
	}

	// By default a tail starts live: started now, it prints a command of
	// the next sender, never LATE's (which is history). The next sender
	// starts once the tail has joined the group (it logs its socket).
	liveTail := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json", "--count", "1", "--internal=false"}, net...)...)
	var liveOut, liveErr syncBuffer
	liveTail.Stdout, liveTail.Stderr = &liveOut, &liveErr
	if err := liveTail.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(liveErr.String(), "udp multicast") && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	last := runNode("EARLY", "--count", "2000", "--rate", "5000")
	if err := liveTail.Wait(); err != nil {
		t.Fatalf("live tail: %v\n%s", err, liveErr.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(liveOut.String())), &first); err != nil || first["seq"].(float64) <= float64(late) || first["account"] != "EARLY" {
		t.Fatalf("live tail printed %q (%v), want a command of EARLY after seq %d", liveOut.String(), err, late)
	}

	// Seq 1 left the ring: a clear error naming what is gone.
	_, stderr, err = tail("--from", "1", "--count", "1")
	if err == nil || !strings.Contains(stderr, "--from 1: the sequencer's retransmit ring no longer holds") || !strings.Contains(stderr, "oldest") {
		t.Fatalf("tail --from 1 with seq 1 gone: err %v\n%s", err, stderr)
	}

	// The end of EARLY's run is still held.
	msgs, stderr, err = tail("--from", fmt.Sprint(last-4), "--count", "5")
	if err != nil || len(msgs) != 5 || msgs[0]["seq"].(float64) != float64(last-4) || msgs[4]["cmd_seq"].(float64) != 2000 {
		t.Fatalf("tail --from %d: %v %v\n%s", last-4, err, msgs, stderr)
	}
}
