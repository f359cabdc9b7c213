package e2e

import (
	"regexp"
	"testing"
)

// TestCLI_Demo runs `seqd demo` (what `make demo` runs, smaller): three
// sequencers in a Raft group, a replayer and three nodes over UDP multicast
// on loopback, the primary killed midway; it must end with the ok line,
// one failover, nothing lost, doubled or diverged, and the replayer's
// archive equal to the nodes' stream.
func TestCLI_Demo(t *testing.T) {
	bin := seqd(t)
	out, errOut, err := run(t, bin, "demo", "--count", "6000", "--rate", "3000", "--timeouts", "test")
	if err != nil {
		t.Fatalf("seqd demo: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	ok := regexp.MustCompile(`(?m)^demo: ok sequenced=(\d+) delivered=(\d+) nodes=3 failovers=1 lost=0 dup=0 diverged=0 failover_ms=[0-9.]+ archived=(\d+)$`)
	m := ok.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no ok line:\n%s\nstderr:\n%s", out, errOut)
	}
	if string(m[1]) != string(m[2]) || string(m[2]) != string(m[3]) {
		t.Fatalf("sequenced=%s delivered=%s archived=%s differ:\n%s", m[1], m[2], m[3], out)
	}
	t.Logf("%s", out)
}
