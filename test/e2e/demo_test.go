package e2e

import (
	"regexp"
	"testing"
)

// TestCLI_Demo runs `seqd demo` (what `make demo` runs, smaller): three
// sequencers in a Raft group, a replayer and three nodes over UDP multicast
// on loopback, the primary killed midway; it must end with the ok line,
// one failover, nothing lost, doubled or diverged, the replayer's archive
// and site B's stream (across the bridge) equal to the nodes' stream, and
// the hot-hot pair's commands each once across its switch.
func TestCLI_Demo(t *testing.T) {
	bin := seqd(t)
	out, errOut, err := run(t, bin, "demo", "--count", "6000", "--rate", "3000", "--timeouts", "test")
	if err != nil {
		t.Fatalf("seqd demo: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	ok := regexp.MustCompile(`(?m)^demo: ok sequenced=(\d+) delivered=(\d+) nodes=3 failovers=1 lost=0 dup=0 diverged=0 failover_ms=[0-9.]+ archived=(\d+) bridged=(\d+) pair_cmds=(\d+) pair_lost=0 pair_dup=0 takeover_ms=[0-9.]+$`)
	m := ok.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no ok line:\n%s\nstderr:\n%s", out, errOut)
	}
	if string(m[1]) != string(m[2]) || string(m[2]) != string(m[3]) || string(m[2]) != string(m[4]) {
		t.Fatalf("sequenced=%s delivered=%s archived=%s bridged=%s differ:\n%s", m[1], m[2], m[3], m[4], out)
	}
	if string(m[5]) != "60" { // one per 100th of DEMO0's 6000 commands
		t.Fatalf("pair_cmds=%s, want 60:\n%s", m[5], out)
	}
	t.Logf("%s", out)
}
