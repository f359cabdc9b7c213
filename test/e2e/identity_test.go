package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCluster_MemberIdentity, as a user meets it: a member's directory
// remembers which member it is and the peers it bootstrapped with.
// Member 3 started on member 2's directory (it used to run as member 3
// with member 2's Raft log, silently) and member 2 given another peer
// list are refused with errors that name both; the right member with
// its list starts again. A cluster key without --cluster is refused (it
// gave a standalone sequencer, without a word), and so is an id that
// --peers lacks (it said raft-addr = "").
func TestCluster_MemberIdentity(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	net := udpArgs(groups(1515))
	refused := func(args []string, want ...string) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, bin, append(args, net...)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 1 {
			t.Fatalf("%v: exit %d (%v), want 1\n%s", args, cmd.ProcessState.ExitCode(), err, tailOf(string(out), 2000))
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Fatalf("%v: want %q in\n%s", args, w, tailOf(string(out), 2000))
			}
		}
	}

	r := startCluster(t, ctx, bin, net, "test")
	r.primary(ctx, 1)
	two := r.procs[1]
	if err := two.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-two.exited
	dir2 := two.args[slices.Index(two.args, "--dir")+1]
	peers := strings.Join(r.peers, ",")

	as3 := slices.Clone(two.args)
	as3[slices.Index(as3, "--id")+1] = "3"
	refused(as3, dir2+" is member 2's directory, this is member 3")

	other := slices.Clone(two.args)
	swapped := strings.Join([]string{r.peers[0], r.peers[1], "3@127.0.0.1:1@127.0.0.1:2@127.0.0.1:3"}, ",")
	other[slices.Index(other, "--peers")+1] = swapped
	refused(other, "member 2 in "+dir2+" bootstrapped with peers "+peers+", now given "+swapped)

	// Member 2 with its own list is member 2 again.
	back := r.start(ctx, 2, two.args)
	r.procs[1] = back
	back.await(t, ctx, regexpStandby, 0, "member 2 back as a standby")

	refused([]string{"sequencer", "--peers", peers}, "--peers is a cluster key, and --cluster is not given")
	refused([]string{"sequencer", "--id", "2", "--dry-run"}, "--id is a cluster key")
	refused([]string{"sequencer", "--cluster", "--id", "4", "--dir", t.TempDir(), "--peers", peers, "--dry-run"}, "id 4 is not in --peers")
}

var regexpStandby = regexp.MustCompile(`^sequencer: standby id=\d+ epoch=\d+ primary=\d+`)
