package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCLI_TailFindsReplayerByGossip: a replayer started with gossip
// (--gossip.bind, no seed: the first member) announces its NAK and rewind
// addresses and the seqs it holds; `seqd tail --gossip ADDR --from 1`
// names no replayer, finds it through gossip, rewinds from it and prints
// the whole stream, which the sequencer's ring no longer holds.
func TestCLI_TailFindsReplayerByGossip(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mc := groups(4545)
	net := udpArgs(mc)
	seq, seqLines, seqErr := startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "94208"}, net...))
	rep := startReplayer(t, ctx, bin, append([]string{"--dir", t.TempDir(), "--nak-addr", freeUDPAddr(t), "--rewind-addr", freeTCPAddr(t),
		"--gossip.bind", "127.0.0.1:0", "--gossip.name", "rep-1"}, net...))
	var gossip string
	for _, f := range strings.Fields(rep.ready) {
		if v, ok := strings.CutPrefix(f, "gossip="); ok {
			gossip = v
		}
	}
	if gossip == "" {
		t.Fatalf("no gossip address in the ready line %q", rep.ready)
	}

	run := func(args ...string) (string, string, error) {
		return runSeqd(ctx, bin, nil, append(args, net...)...)
	}
	const count = 3000
	out, errOut, err := run("node", "--account", "EARLY", "--count", fmt.Sprint(count), "--rate", "5000", "--size", "200")
	if err != nil {
		t.Fatalf("node EARLY: %v\n%s%s", err, out, errOut)
	}
	last := field(t, out[strings.Index(out, "node: ok"):], "last_seq")

	// Gossip refreshes the replayer's highest seq every second.
	out, errOut, err = run("tail", "--format", "json", "--from", "1", "--count", fmt.Sprint(last), "--gossip", gossip, "--gossip.wait", "20s")
	// A failure shows the replayer's log too: once, under heavy load, the
	// tail found its gossip port refused for 20 s (not reproduced since).
	if err != nil {
		t.Fatalf("tail --gossip: %v\n%s%s\nreplayer:\n%s", err, out, errOut, tailOf(rep.stderr.String(), 3000))
	}
	if !strings.Contains(errOut, "gossip: replayer selected") || !strings.Contains(errOut, "name=rep-1") {
		t.Fatalf("the tail did not select the replayer by gossip:\n%s\nreplayer:\n%s", errOut, tailOf(rep.stderr.String(), 3000))
	}
	checkWholeStream(t, out, last, "EARLY", count)

	// Gossip that shows no replayer: the tail says so and goes on
	// without one, so --from 1 fails as with none named.
	out, errOut, err = run("tail", "--from", "1", "--count", "1", "--gossip", "127.0.0.1:1", "--gossip.wait", "300ms")
	if err == nil || !strings.Contains(errOut, "no replayer holds the seqs wanted") || !strings.Contains(errOut, "no longer retained by sequencer") {
		t.Fatalf("tail --gossip with no replayer: %v\n%s%s", err, out, errOut)
	}

	t.Log(rep.stop(t))
	stopSequencer(t, seq, seqLines, seqErr)
}
