package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterProc is one `seqd sequencer --cluster` process and what it printed.
type clusterProc struct {
	id   int
	args []string
	*lineProc
}

var primaryLine = regexp.MustCompile(`^sequencer: primary id=(\d+) epoch=(\d+) first_seq=(\d+) started_ns=(\d+)`)

// primaryOf returns the epochs this process began as primary, with the
// wall time (ns) of each epoch's first record.
func (p *clusterProc) epochs() map[uint64]int64 {
	out := map[uint64]int64{}
	for _, l := range p.output() {
		if m := primaryLine.FindStringSubmatch(l); m != nil {
			e, _ := strconv.ParseUint(m[2], 10, 64)
			ns, _ := strconv.ParseInt(m[4], 10, 64)
			out[e] = ns
		}
	}
	return out
}

type clusterRun struct {
	t     *testing.T
	bin   string
	net   []string
	procs []*clusterProc
	admin []string // admin address of member i+1
	peers []string // ID@RAFT@ADMIN@FETCH of each member
}

// startCluster starts three cluster members on loopback (UDP multicast
// stream), each with its own directory, and returns once all are ready.
func startCluster(t *testing.T, ctx context.Context, bin string, net []string, timeouts string) *clusterRun {
	t.Helper()
	return startClusterIn(t, ctx, bin, net, timeouts, nil)
}

// startClusterIn is startCluster with member i+1's directory dirs[i]
// where given (not empty).
func startClusterIn(t *testing.T, ctx context.Context, bin string, net []string, timeouts string, dirs []string) *clusterRun {
	t.Helper()
	return startClusterWith(t, ctx, bin, net, timeouts, dirs, nil)
}

// startClusterWith is startClusterIn with member id's own flags
// (memberArgs(id), nil: none): its certificate.
func startClusterWith(t *testing.T, ctx context.Context, bin string, net []string, timeouts string, dirs []string, memberArgs func(id int) []string) *clusterRun {
	t.Helper()
	r := &clusterRun{t: t, bin: bin, net: net}
	var peers []string
	for id := 1; id <= 3; id++ {
		admin := freeTCPAddr(t)
		r.admin = append(r.admin, admin)
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", id, freeTCPAddr(t), admin, freeTCPAddr(t)))
	}
	r.peers = peers
	for id := 1; id <= 3; id++ {
		dir := t.TempDir()
		if id <= len(dirs) && dirs[id-1] != "" {
			dir = dirs[id-1]
		}
		args := append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(id), "--dir", dir,
			"--peers", strings.Join(peers, ","), "--timeouts", timeouts}, net...)
		if memberArgs != nil {
			args = append(args, memberArgs(id)...)
		}
		r.procs = append(r.procs, r.start(ctx, id, args))
	}
	return r
}

func (r *clusterRun) start(ctx context.Context, id int, args []string) *clusterProc {
	t := r.t
	t.Helper()
	return &clusterProc{id: id, args: args, lineProc: startLineProc(t, ctx, r.bin, args, fmt.Sprintf("member %d", id), false)}
}

// primary waits for a process that began epoch >= min as primary and is
// still running; it returns the process, the epoch and its start time.
func (r *clusterRun) primary(ctx context.Context, min uint64) (*clusterProc, uint64, int64) {
	return r.primaryAfter(ctx, min, 0)
}

// primaryAfter is primary for an epoch that began after the wall time
// after (ns): on a loaded machine raft may change the leader by itself,
// and a failover is timed to the first epoch begun after the kill.
func (r *clusterRun) primaryAfter(ctx context.Context, min uint64, after int64) (*clusterProc, uint64, int64) {
	r.t.Helper()
	for ctx.Err() == nil {
		var best *clusterProc
		var be uint64
		var bns int64
		for _, p := range r.procs {
			select {
			case <-p.exited:
				continue
			default:
			}
			for e, ns := range p.epochs() {
				if e >= min && e > be && ns > after {
					best, be, bns = p, e, ns
				}
			}
		}
		if best != nil {
			return best, be, bns
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.t.Fatalf("no primary of epoch >= %d begun after %d", min, after)
	return nil, 0, 0
}

// TestCluster_KillPrimaryUnderLoad: three `seqd sequencer --cluster`
// processes and a sending node over UDP multicast on loopback. Each round
// SIGKILLs the primary while a node sends (a new account each round); a
// standby becomes primary of the next epoch, the node gets every command
// acknowledged once with its stream verified dense from seq 1 (no gap, no
// duplicate; `seqd node` checks it), and the killed member, restarted on
// its directory, rejoins as a standby and catches up (so the next round
// may kill anyone). At the end a read-only node rewinds the whole stream,
// across every epoch, from seq 1. Reports the time from each kill to the
// new epoch's first record.
func TestCluster_KillPrimaryUnderLoad(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mc := groups(808)
	net := udpArgs(mc)
	r := startCluster(t, ctx, bin, net, "lan")
	_, epoch, _ := r.primary(ctx, 1)

	const rounds, count = 3, 12000
	var times []float64
	for round := 1; round <= rounds; round++ {
		old, e0, _ := r.primary(ctx, epoch)
		account := fmt.Sprintf("LOAD%d", round)
		nodeOut, nodeDone := startBackground(t, exec.CommandContext(ctx, bin, append([]string{"node", "--account", account, "--count", fmt.Sprint(count), "--rate", "4000", "--size", "64", "--timeout", "90s"}, net...)...))

		// Kill once the node's commands are flowing (1.5 s at 4000/s):
		// the primary of then (a loaded machine may have changed it; a
		// standby killed instead while the last primary is deposed would
		// stall the group, by design, until it returns).
		time.Sleep(1500 * time.Millisecond)
		old, e0, _ = r.primary(ctx, epoch)
		killed := time.Now()
		if err := old.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-old.exited
		p, e1, startedNS := r.primaryAfter(ctx, e0+1, killed.UnixNano())
		failover := float64(startedNS-killed.UnixNano()) / 1e6
		times = append(times, failover)
		t.Logf("round %d: SIGKILL of primary %d (epoch %d) to the first record of epoch %d on member %d: %.1f ms",
			round, old.id, e0, e1, p.id, failover)
		epoch = e1

		select {
		case err := <-nodeDone:
			out := nodeOut.String()
			if err != nil || !strings.Contains(out, fmt.Sprintf("node: ok account=%s sent=%d acked=%d ", account, count, count)) {
				t.Fatalf("round %d: node: %v\n%s", round, err, tailOf(out, 3000))
			}
			t.Logf("round %d: %s", round, strings.TrimSpace(out[strings.LastIndex(out, "node: ok"):]))
		case <-ctx.Done():
			t.Fatalf("round %d: node did not finish:\n%s", round, tailOf(nodeOut.String(), 3000))
		}

		// The killed member comes back on its directory as a standby
		// and catches up with the primary.
		back := r.start(ctx, old.id, old.args)
		r.procs[old.id-1] = back
		want := p.published(t, ctx, r)
		for ctx.Err() == nil {
			st := r.status(ctx, old.id)
			if st != nil && st.Role == "standby" && st.Contiguous >= want {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatalf("round %d: restarted member %d did not catch up to %d", round, old.id, want)
		}
	}

	// A new reader rewinds the whole stream, across every epoch.
	out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--read-only", "--expect", fmt.Sprint(rounds * count), "--timeout", "60s"}, net...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("others=%d ", rounds*count)) {
		t.Fatalf("reader from seq 1: %v\n%s", err, tailOf(string(out), 3000))
	}
	sort.Float64s(times)
	fmt.Printf("cluster failover: rounds=%d p50_ms=%.1f max_ms=%.1f epochs=%d lost=0 dup=0\n", rounds, times[len(times)/2], times[len(times)-1], epoch)
}

// status reads member id's status through its admin endpoint (nil when
// it does not answer).
func (r *clusterRun) status(ctx context.Context, id int) *memberStatus {
	out, err := exec.CommandContext(ctx, r.bin, "admin", "status", "--addr", r.admin[id-1], "--timeout", "2s").CombinedOutput()
	// Exit 3 (degraded: a member down or catching up) and 4 (no
	// primary) still print every member that answered.
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 4)) {
		return nil
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 8 && f[0] == fmt.Sprint(id) {
			held, _ := strconv.ParseUint(f[7], 10, 64)
			pub, _ := strconv.ParseUint(f[6], 10, 64)
			return &memberStatus{Role: f[1], Contiguous: held, Published: pub}
		}
	}
	return nil
}

type memberStatus struct {
	Role       string
	Contiguous uint64
	Published  uint64
}

// published is the primary's last published seq, from `seqd admin status`.
func (p *clusterProc) published(t *testing.T, ctx context.Context, r *clusterRun) uint64 {
	t.Helper()
	for ctx.Err() == nil {
		if st := r.status(ctx, p.id); st != nil && st.Role == "primary" {
			return st.Published
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("member %d: no primary status", p.id)
	return 0
}

// beganEpoch waits for the member that began epoch e as primary (nil if
// none did before ctx ended).
func (r *clusterRun) beganEpoch(ctx context.Context, e uint64) *clusterProc {
	for ctx.Err() == nil {
		for _, p := range r.procs {
			if _, ok := p.epochs()[e]; ok {
				return p
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// awaitPublished waits until a primary's status shows at least n seqs
// published.
func (r *clusterRun) awaitPublished(t *testing.T, ctx context.Context, n uint64) {
	t.Helper()
	for ctx.Err() == nil {
		for id := range r.procs {
			if st := r.status(ctx, id+1); st != nil && st.Role == "primary" && st.Published >= n {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no primary published %d seqs", n)
}

var transferLine = regexp.MustCompile(`^admin: transferred primary from=(\d+) to=(\d+) epoch=(\d+) cut=(\d+) pause_ms=([0-9.]+)`)

// TestCluster_AdminStatusAndTransfer: `seqd admin status` asked of a
// standby lists the three members with one primary; `seqd admin
// transfer-primary TO` under load hands the role to TO in the next epoch,
// reports the pause, and the node gets every command acknowledged once,
// its stream verified.
func TestCluster_AdminStatusAndTransfer(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc := groups(909)
	net := udpArgs(mc)
	// The test profile: a loaded machine must not depose the new primary
	// by chance (its lease would run out), which would make another epoch;
	// the handover's pause does not depend on the election timeouts.
	r := startCluster(t, ctx, bin, net, "test")
	r.primary(ctx, 1)

	const count = 12000
	nodeOut, nodeDone := startBackground(t, exec.CommandContext(ctx, bin, append([]string{"node", "--account", "MOVE", "--count", fmt.Sprint(count), "--rate", "4000", "--size", "64", "--timeout", "90s"}, net...)...))
	// Under load: the node's commands reach the primary (a node slow to
	// start on a loaded machine took longer than a fixed sleep).
	r.awaitPublished(t, ctx, 2000)
	// The primary now, not the first one: a starved leader may have lost
	// its lease meanwhile, and the transfer goes from the current epoch.
	old, e0, _ := r.primary(ctx, 1)
	to := old.id%3 + 1

	out, err := exec.CommandContext(ctx, bin, "admin", "status", "--addr", r.admin[to-1]).CombinedOutput()
	if err != nil {
		t.Fatalf("admin status: %v\n%s", err, out)
	}
	t.Logf("admin status:\n%s", out)
	if !strings.Contains(string(out), fmt.Sprintf("epoch=%d primary=%d", e0, old.id)) || strings.Count(string(out), " primary ") != 1 || strings.Count(string(out), " standby ") != 2 {
		t.Fatalf("admin status does not show one primary (%d) and two standbys:\n%s", old.id, out)
	}

	out, err = exec.CommandContext(ctx, bin, "admin", "transfer-primary", "--addr", r.admin[to-1], fmt.Sprint(to)).CombinedOutput()
	if err != nil {
		t.Fatalf("admin transfer-primary: %v\n%s", err, out)
	}
	m := transferLine.FindStringSubmatch(strings.TrimSpace(string(out)))
	if m == nil || m[1] != fmt.Sprint(old.id) || m[2] != fmt.Sprint(to) || m[3] != fmt.Sprint(e0+1) {
		t.Fatalf("admin transfer-primary printed %q, want from=%d to=%d epoch=%d", out, old.id, to, e0+1)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	// Who began epoch e0+1, from the members' own lines: an epoch a loaded
	// machine adds by itself later does not change that.
	p := r.beganEpoch(ctx, e0+1)
	if p == nil {
		t.Fatalf("no primary of epoch %d after the transfer", e0+1)
	}
	if p.id != to {
		t.Fatalf("primary %d of epoch %d after the transfer, want %d of %d", p.id, e0+1, to, e0+1)
	}
	for _, l := range p.output() {
		if strings.HasPrefix(l, "sequencer: primary") {
			t.Logf("%s", l)
		}
	}
	select {
	case err := <-nodeDone:
		out := nodeOut.String()
		if err != nil || !strings.Contains(out, fmt.Sprintf("node: ok account=MOVE sent=%d acked=%d ", count, count)) {
			t.Fatalf("node: %v\n%s", err, tailOf(out, 3000))
		}
	case <-ctx.Done():
		t.Fatalf("node did not finish:\n%s", tailOf(nodeOut.String(), 3000))
	}
	fmt.Printf("cluster handover: pause_ms=%s epoch=%d->%d\n", m[5], e0, e0+1)
}

var drillLine = regexp.MustCompile(`(?m)^drill failover rounds=3 p50_ms=[0-9.]+ p99_ms=[0-9.]+ max_ms=[0-9.]+ lost=0 dup=0 diverged=0$`)

// TestCLI_DrillFailover: `seqd drill failover --rounds 3` (two SIGKILLs
// of the primary and a partition of it, each under the load of three
// sending nodes, with a checking and a fast-mode node and a replayer, all
// separate processes) ends with its summary line showing lost=0 dup=0
// diverged=0 and exit status 0; a round line names the partition.
func TestCLI_DrillFailover(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "drill", "failover", "--rounds", "3").CombinedOutput()
	if err != nil || !drillLine.Match(out) {
		t.Fatalf("drill: %v\n%s", err, tailOf(string(out), 4000))
	}
	if !regexp.MustCompile(`(?m)^drill: round 3 fault=partition `).Match(out) {
		t.Fatalf("no partition round:\n%s", out)
	}
	t.Logf("%s", out)
}

// TestCluster_AddAndRemoveMemberLive: a fourth `seqd sequencer --cluster
// --join` (the full member list, itself included) joins when `seqd admin
// add-member` asks the primary, follows the stream as a standby and
// catches up; `seqd admin remove-member` takes it out again; a node's
// commands are acked meanwhile.
func TestCluster_AddAndRemoveMemberLive(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc := groups(4242)
	net := udpArgs(mc)
	r := startCluster(t, ctx, bin, net, "test")
	r.primary(ctx, 1)
	admin4 := freeTCPAddr(t)
	four := fmt.Sprintf("4@%s@%s@%s", freeTCPAddr(t), admin4, freeTCPAddr(t))
	r.admin = append(r.admin, admin4)
	args := append([]string{"sequencer", "--cluster", "--join", "--id", "4", "--dir", t.TempDir(),
		"--peers", strings.Join(append(r.peers, four), ","), "--timeouts", "test"}, net...)
	r.procs = append(r.procs, r.start(ctx, 4, args))

	out, err := exec.CommandContext(ctx, bin, "admin", "add-member", "--addr", r.admin[0], four).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "admin: added member 4") {
		t.Fatalf("add-member: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "GROW", "--count", "3000", "--timeout", "60s"}, net...)...).CombinedOutput(); err != nil || !strings.Contains(string(out), "acked=3000 ") {
		t.Fatalf("node: %v\n%s", err, tailOf(string(out), 2000))
	}
	for ctx.Err() == nil {
		if st := r.status(ctx, 4); st != nil && st.Role == "standby" && st.Contiguous >= 3000 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("member 4 did not catch up as a standby")
	}
	status, err := exec.CommandContext(ctx, bin, "admin", "status", "--addr", admin4).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "members=4") {
		t.Fatalf("status after add: %v\n%s", err, status)
	}
	t.Logf("%s", status)
	out, err = exec.CommandContext(ctx, bin, "admin", "remove-member", "--addr", r.admin[1], "4").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "admin: removed member 4") {
		t.Fatalf("remove-member: %v\n%s", err, out)
	}
	status, err = exec.CommandContext(ctx, bin, "admin", "status", "--addr", r.admin[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "members=3") {
		t.Fatalf("status after remove: %v\n%s", err, status)
	}
}

// TestCLI_ClusterConfigFile: the cluster keys come from a TOML file like
// every other key; --dry-run prints what a member would run with, and a
// peers list without this member is refused naming the key.
func TestCLI_ClusterConfigFile(t *testing.T) {
	bin := seqd(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "member.toml")
	conf := `cluster = true
id = 2
dir = "` + filepath.Join(dir, "data") + `"
peers = "1@127.0.0.1:7301@127.0.0.1:7401@127.0.0.1:7501,2@127.0.0.1:7302@127.0.0.1:7402@127.0.0.1:7502,3@127.0.0.1:7303@127.0.0.1:7403@127.0.0.1:7503"
timeouts = "wan"
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "sequencer", "--config", path, "--dry-run").CombinedOutput()
	want := "sequencer: config cluster id=2 dir=" + filepath.Join(dir, "data") + " raft=127.0.0.1:7302 admin=127.0.0.1:7402 fetch=127.0.0.1:7502 members=3 timeouts=wan heartbeat=1s election=1s leader_lease=500ms join=false"
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("dry-run: %v\n%s\nwant prefix %s", err, out, want)
	}
	out, err = exec.Command(bin, "sequencer", "--config", path, "--id", "4", "--raft-addr", "127.0.0.1:7304", "--admin-addr", "127.0.0.1:7404", "--dry-run").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "id 4 is not in --peers") || !strings.Contains(string(out), "one of 1, 2, 3") {
		t.Fatalf("a member missing from peers: %v\n%s", err, out)
	}
}
