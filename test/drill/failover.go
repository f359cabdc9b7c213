package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/test/proc"
)

// drillProc is one child process (a member, the replayer or a node) of
// the drill, across its restarts.
type drillProc struct {
	name  string
	id    int    // members: 1..3
	admin string // members: control endpoint
	fault string // members: fault endpoint
	args  []string
	p     *proc.Proc // the running (or last) incarnation
}

func (p *drillProc) snapshot() []string { return p.p.Lines() }

func (p *drillProc) alive() bool { return p.p.Alive() }

func (p *drillProc) send(line string) { p.p.Send(line) }

var drillPrimaryLine = regexp.MustCompile(`^sequencer: primary id=(\d+) epoch=(\d+) first_seq=(\d+) started_ns=(\d+)`)

func (p *drillProc) primaryEpoch() (epoch uint64, startedNS int64) {
	for _, l := range p.snapshot() {
		if s := drillPrimaryLine.FindStringSubmatch(l); s != nil {
			e, _ := strconv.ParseUint(s[2], 10, 64)
			ns, _ := strconv.ParseInt(s[4], 10, 64)
			if e > epoch {
				epoch, startedNS = e, ns
			}
		}
	}
	return epoch, startedNS
}

var drillEpochLine = regexp.MustCompile(`^drillnode: epoch=(\d+) seq=(\d+) ns=(\d+)`)

// newEpochAt is when the node delivered the first message of the first
// epoch above e0 at or after wall time after (ns); 0 if it has not.
func (p *drillProc) newEpochAt(e0 uint64, after int64) int64 {
	for _, l := range p.snapshot() {
		if s := drillEpochLine.FindStringSubmatch(l); s != nil {
			e, _ := strconv.ParseUint(s[1], 10, 64)
			ns, _ := strconv.ParseInt(s[3], 10, 64)
			if e > e0 && ns >= after {
				return ns
			}
		}
	}
	return 0
}

type drill struct {
	exe     string
	out     io.Writer
	dir     string
	net     []string
	members []*drillProc
	nodes   []*drillProc // senders, then the checker, then the fast node
	all     []*drillProc
	// procs are the children; the first that exits on its own (Died)
	// fails the drill.
	procs *proc.Set
	// fastStops counts the fast node's stops with ErrDiverged.
	fastStops int
}

func (d *drill) logPath(name string) string { return filepath.Join(d.dir, name+".log") }

// start starts (or restarts) p, its stdout and stderr appended to its log.
func (d *drill) start(ctx context.Context, p *drillProc) error {
	logf, err := os.OpenFile(d.logPath(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	log := &syncWriter{w: logf}
	p.p, err = d.procs.Start(ctx, proc.Spec{Name: p.name, Path: d.exe, Args: p.args, MustRun: true, Stdin: true,
		Stderr: log, Stdout: log,
		// A fast node stopped by ErrDiverged: the contract of fast
		// mode; the drill restarts it between rounds.
		Expected: func(err error) bool {
			var ee *exec.ExitError
			return errors.As(err, &ee) && ee.ExitCode() == ExitDiverged
		}})
	if err != nil {
		logf.Close()
		return err
	}
	// This incarnation's: a restart replaces p.p meanwhile.
	exited := p.p.Exited()
	go func() {
		<-exited
		logf.Close()
	}()
	return nil
}

// syncWriter serializes the writes of a child's stdout and stderr
// goroutines to its log.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (d *drill) kill(p *drillProc) { p.p.Kill() }

// died is the error of the first child that exited on its own.
func (d *drill) died() error {
	p := d.procs.Dead()
	return fmt.Errorf("%s exited on its own (%v); its log: %s", p.Name(), p.Err(), d.logPath(p.Name()))
}

// sleep waits for dt, failing early when a child dies.
func (d *drill) sleep(ctx context.Context, dt time.Duration) error {
	select {
	case <-d.procs.Died():
		return d.died()
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(dt):
		return nil
	}
}

// primary waits for the live member that began the highest epoch >= min
// after the wall time after (ns).
func (d *drill) primary(ctx context.Context, min uint64, after int64) (*drillProc, uint64, int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var best *drillProc
		var be uint64
		var bns int64
		for _, m := range d.members {
			if !m.alive() {
				continue
			}
			if e, ns := m.primaryEpoch(); e >= min && e > be && ns > after {
				best, be, bns = m, e, ns
			}
		}
		if best != nil {
			return best, be, bns, nil
		}
		if err := d.sleep(ctx, time.Millisecond); err != nil {
			return nil, 0, 0, err
		}
	}
	return nil, 0, 0, fmt.Errorf("no primary of epoch >= %d within 30s", min)
}

// delivered waits until every live node delivered the first message of an
// epoch above e0 at or after after (ns), and returns the latest of those
// times (ns).
func (d *drill) delivered(ctx context.Context, e0 uint64, after int64) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var latest int64
		all := true
		for _, n := range d.nodes {
			if !n.alive() {
				continue
			}
			ns := n.newEpochAt(e0, after)
			if ns == 0 {
				all = false
				break
			}
			latest = max(latest, ns)
		}
		if all {
			return latest, nil
		}
		if err := d.sleep(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
	var missing []string
	for _, n := range d.nodes {
		if n.alive() && n.newEpochAt(e0, after) == 0 {
			missing = append(missing, n.name)
		}
	}
	return 0, fmt.Errorf("no message of an epoch above %d delivered to %s within 30s", e0, strings.Join(missing, ", "))
}

// partition switches member m's fault-injected partition on or off and
// returns how many stream datagrams its fault injection dropped so far.
func (d *drill) partition(ctx context.Context, m *drillProc, on bool) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.fault+"/v1/fault?partition="+strconv.FormatBool(on), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("fault endpoint of member %d: %w", m.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("fault endpoint of member %d: %s: %s", m.id, resp.Status, b)
	}
	var st struct {
		Dropped uint64 `json:"dropped"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("fault endpoint of member %d: %w", m.id, err)
	}
	return st.Dropped, nil
}

// caughtUp waits until member m is a standby holding what the primary
// (whichever member it is) published when the wait began.
func (d *drill) caughtUp(ctx context.Context, m *drillProc) error {
	deadline := time.Now().Add(time.Minute)
	var want, epoch uint64
	for time.Now().Before(deadline) {
		if err := d.sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, o := range d.members {
			if want == 0 && o != m && o.alive() {
				if st, err := ops.FetchStatus(qctx, o.admin); err == nil && st.Role == cluster.RolePrimary.String() {
					want, epoch = st.Published, st.Epoch
				}
			}
		}
		ms, err := ops.FetchStatus(qctx, m.admin)
		cancel()
		// In the primary's epoch too: a member healed from a partition
		// may hold records past the cut in its store.
		if err == nil && want > 0 && ms.Role == cluster.RoleStandby.String() && ms.Epoch >= epoch && ms.Contiguous >= want {
			return nil
		}
	}
	return fmt.Errorf("member %d did not catch up to %d as a standby within a minute", m.id, want)
}

// report is one `drillnode: report` line.
type drillReport struct {
	last, lost, dup, sent, acked uint64
	digest, self                 string
	senders                      map[string]uint64
}

var drillReportLine = regexp.MustCompile(`^drillnode: report last=(\d+) digest=([0-9a-f]+) lost=(\d+) dup=(\d+) sent=(\d+) acked=(\d+) senders=(\S+) self=(\S+)`)

// reports asks every live node for a report and returns them by name.
func (d *drill) reports(ctx context.Context) (map[string]drillReport, error) {
	seen := map[*drillProc]int{}
	for _, n := range d.nodes {
		if n.alive() {
			seen[n] = len(n.snapshot())
			n.send("report")
		}
	}
	out := map[string]drillReport{}
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < len(seen) {
		if time.Now().After(deadline) {
			return nil, errors.New("nodes did not report within 10s")
		}
		for n, from := range seen {
			if _, ok := out[n.name]; ok {
				continue
			}
			lines := n.snapshot()
			for _, l := range lines[min(from, len(lines)):] {
				s := drillReportLine.FindStringSubmatch(l)
				if s == nil {
					continue
				}
				var r drillReport
				r.last, _ = strconv.ParseUint(s[1], 10, 64)
				r.digest, r.self = s[2], s[8]
				r.lost, _ = strconv.ParseUint(s[3], 10, 64)
				r.dup, _ = strconv.ParseUint(s[4], 10, 64)
				r.sent, _ = strconv.ParseUint(s[5], 10, 64)
				r.acked, _ = strconv.ParseUint(s[6], 10, 64)
				r.senders = map[string]uint64{}
				for _, kv := range strings.Split(s[7], ",") {
					if i := strings.LastIndexByte(kv, ':'); i > 0 {
						r.senders[kv[:i]], _ = strconv.ParseUint(kv[i+1:], 10, 64)
					}
				}
				out[n.name] = r
				break
			}
		}
		if err := d.sleep(ctx, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restartFast restarts the fast node after it stopped with ErrDiverged
// and waits until it delivered what the checker had.
func (d *drill) restartFast(ctx context.Context) error {
	fast := d.nodes[len(d.nodes)-1]
	if fast.alive() {
		return nil
	}
	d.fastStops++
	fmt.Fprintf(d.out, "drill: fast node stopped with ErrDiverged (%s); restarted from seq 1\n", lastLines(strings.Join(fast.snapshot(), "\n"), 1))
	if err := d.start(ctx, fast); err != nil {
		return err
	}
	rs, err := d.reports(ctx)
	if err != nil {
		return err
	}
	want := rs["check"].last
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		rs, err := d.reports(ctx)
		if err != nil {
			return err
		}
		if rs[fast.name].last >= want {
			return nil
		}
	}
	return fmt.Errorf("restarted fast node did not reach seq %d within a minute", want)
}

// Config is one failover drill.
type Config struct {
	// Rounds is how many failovers; 0 with Soak runs only the soak.
	Rounds int
	// RatePerSecond is the commands per second of each of the three
	// sending nodes.
	RatePerSecond int
	// Pause is the load before each fault (plus a seeded extra of up to
	// as much again).
	Pause time.Duration
	// Seed seeds the schedule and the multicast groups (0: from the
	// clock; printed).
	Seed uint64
	// Timeouts is the raft timing profile of the sequencers
	// (cluster.Profiles: lan, wan, test).
	Timeouts string
	// Keep keeps the directories and logs (printed at the end).
	Keep bool
	// Soak, before the rounds, runs the load this long with no fault and
	// counts the epochs it began (a false failover each).
	Soak time.Duration
	// Exe is the seqd binary the children run; empty: this process's own.
	Exe string
	// Out receives the drill's lines; nil: os.Stdout.
	Out io.Writer
}

// DefaultConfig is `seqd drill failover` with no flags.
func DefaultConfig() Config {
	return Config{Rounds: 20, RatePerSecond: 1000, Pause: 500 * time.Millisecond, Timeouts: "lan"}
}

// Validate checks the counts and the profile.
func (c Config) Validate() error {
	if c.Rounds < 0 || c.Rounds == 0 && c.Soak <= 0 {
		return config.New(ErrConfig, "Rounds", c.Rounds, ">= 1 (or 0 with a Soak)")
	}
	if c.RatePerSecond < 1 {
		return config.New(ErrConfig, "RatePerSecond", c.RatePerSecond, ">= 1")
	}
	if _, ok := cluster.Profiles[c.Timeouts]; !ok {
		return config.New(ErrConfig, "Timeouts", c.Timeouts, "one of: lan, wan, test")
	}
	return nil
}

// Run runs the failover drill (the `seqd drill failover` help says what
// it does) and fails when a child dies on its own or the streams broke
// the contract.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	rounds, rate, pause, soak := cfg.Rounds, cfg.RatePerSecond, cfg.Pause, cfg.Soak
	st, err := begin(ctx, cfg.Out, cfg.Seed, cfg.Exe, cfg.Keep, "drill", "seqd-drill", 0x5eed, 83, 1)
	if err != nil {
		return err
	}
	defer st.end()
	d, ctx, seed, r, dir := st.d, st.ctx, st.seed, st.r, st.d.dir
	addrs, err := freeport.Addrs(13)
	if err != nil {
		return err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", i+1, addrs[4*i], addrs[4*i+1], addrs[4*i+2]))
	}
	for i := range 3 {
		m := &drillProc{name: fmt.Sprintf("sequencer-%d", i+1), id: i + 1, admin: addrs[4*i+1], fault: addrs[4*i+3]}
		m.args = append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(m.id), "--dir", filepath.Join(dir, fmt.Sprint(m.id)),
			"--peers", strings.Join(peers, ","), "--timeouts", cfg.Timeouts,
			"--fault-addr", m.fault, "--fault-seed", fmt.Sprint(seed)}, d.net...)
		if err := d.start(ctx, m); err != nil {
			return err
		}
		d.members = append(d.members, m)
		d.all = append(d.all, m)
	}
	fmt.Fprintf(d.out, "drill failover: seed=%d, 3 sequencers (%s timeouts), a replayer, 3 safe senders at %d cmd/s each, a checker and a fast node; %d rounds; logs in %s\n",
		seed, cfg.Timeouts, rate, rounds, dir)
	_, epoch, _, err := d.primary(ctx, 1, 0)
	if err != nil {
		return err
	}
	nak := addrs[12]
	rep := &drillProc{name: "replayer", args: append([]string{"replayer", "--dir", filepath.Join(dir, "replayer"), "--nak-addr", nak}, d.net...)}
	if err := d.start(ctx, rep); err != nil {
		return err
	}
	d.all = append(d.all, rep)
	nodeArgs := func(extra ...string) []string {
		return append(append([]string{"drill", "node", "--replayer", nak}, extra...), d.net...)
	}
	for i := 1; i <= 3; i++ {
		d.nodes = append(d.nodes, &drillProc{name: fmt.Sprintf("sender-%d", i), args: nodeArgs("--account", fmt.Sprintf("DRILL%d", i), "--rate", fmt.Sprint(rate))})
	}
	d.nodes = append(d.nodes, &drillProc{name: "check", args: nodeArgs()}, &drillProc{name: "fast", args: nodeArgs("--node.mode", "fast")})
	for _, n := range d.nodes {
		if err := d.start(ctx, n); err != nil {
			return err
		}
		d.all = append(d.all, n)
	}
	// Every node under way: it delivered a message of the current epoch.
	if _, err := d.delivered(ctx, epoch-1, 0); err != nil {
		return err
	}

	falseFailovers, err := d.soak(ctx, soak, epoch)
	if err != nil {
		return err
	}
	epoch += falseFailovers
	var times []float64
	for round := 1; round <= rounds; round++ {
		if err := d.restartFast(ctx); err != nil {
			return err
		}
		if err := d.sleep(ctx, pause+time.Duration(r.Int64N(int64(pause)+1))); err != nil {
			return err
		}
		// The primary now (a loaded machine may have changed it).
		old, e0, _, err := d.primary(ctx, epoch, 0)
		if err != nil {
			return err
		}
		kind := "kill"
		if round%3 == 0 {
			kind = "partition"
		}
		t0 := time.Now()
		if kind == "kill" {
			d.kill(old)
		} else if _, err := d.partition(ctx, old, true); err != nil {
			return err
		}
		p, e1, startedNS, err := d.primary(ctx, e0+1, t0.UnixNano())
		if err != nil {
			return fmt.Errorf("drill failover: round %d: %w", round, err)
		}
		at, err := d.delivered(ctx, e0, t0.UnixNano())
		if err != nil {
			return fmt.Errorf("drill failover: round %d: %w", round, err)
		}
		ms := float64(at-t0.UnixNano()) / 1e6
		times = append(times, ms)
		epoch = e1
		// Every fifth round a standby of the new primary dies too (the
		// faulted member is not back yet: the primary keeps its quorum
		// with the one that returns first).
		var standby *drillProc
		if round%5 == 0 {
			for _, m := range d.members {
				if m != old && m != p && m.alive() {
					standby = m
				}
			}
			if standby != nil {
				d.kill(standby)
				kind += "+standby"
			}
		}
		t1 := time.Now()
		extra := ""
		if kind == "kill" || strings.HasPrefix(kind, "kill+") {
			if err := d.start(ctx, old); err != nil {
				return err
			}
		} else {
			// How many stream datagrams the partition dropped: proof
			// that it cut something.
			dropped, err := d.partition(ctx, old, false)
			if err != nil {
				return err
			}
			extra += fmt.Sprintf(" partition_dropped=%d", dropped)
		}
		if err := d.caughtUp(ctx, old); err != nil {
			return fmt.Errorf("drill failover: round %d: %w", round, err)
		}
		if standby != nil {
			if err := d.start(ctx, standby); err != nil {
				return err
			}
			if err := d.caughtUp(ctx, standby); err != nil {
				return fmt.Errorf("drill failover: round %d: %w", round, err)
			}
		}
		if standby != nil {
			extra += fmt.Sprintf(" standby_killed=%d", standby.id)
		}
		fmt.Fprintf(d.out, "drill: round %d fault=%s old=%d epoch=%d->%d new=%d primary_ms=%.1f failover_ms=%.1f caught_up_ms=%.0f%s\n",
			round, kind, old.id, e0, e1, p.id, float64(startedNS-t0.UnixNano())/1e6, ms, float64(time.Since(t1).Microseconds())/1000, extra)
	}
	if err := d.restartFast(ctx); err != nil {
		return err
	}
	return d.finish(ctx, rounds, times, nak)
}

// soak runs the load for dur with no fault (nothing when dur is 0) and
// prints how many epochs began meanwhile: each is a false failover, a
// leader change nobody asked for (a starved leader that lost its lease, a
// follower that missed heartbeats). It also counts the members' raft
// warnings that explain one, from their logs.
func (d *drill) soak(ctx context.Context, dur time.Duration, e0 uint64) (uint64, error) {
	if dur <= 0 {
		return 0, nil
	}
	t0 := time.Now()
	if err := d.sleep(ctx, dur); err != nil {
		return 0, err
	}
	_, e1, _, err := d.primary(ctx, e0, 0)
	if err != nil {
		return 0, err
	}
	// hashicorp/raft's lines start with an RFC 3339 UTC stamp in
	// milliseconds: those of the soak sort at or after since. The death
	// watch's (cluster/deathwatch.go) are the member's own log lines,
	// stamped time=...: with no fault there must be none.
	since := t0.UTC().Format("2006-01-02T15:04:05.000Z")
	var timeouts, stepDowns, watched int
	for _, m := range d.members {
		b, _ := os.ReadFile(filepath.Join(d.dir, m.name+".log"))
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimPrefix(l, "time=") // slog's text lines (UTC on the drill's machines)
			if len(l) < len(since) || l[:len(since)] < since {
				continue
			}
			if strings.Contains(l, "heartbeat timeout reached") {
				timeouts++
			}
			if strings.Contains(l, "failed to contact quorum of nodes, stepping down") {
				stepDowns++
			}
			if strings.Contains(l, "raft leader process gone") {
				watched++
			}
		}
	}
	fmt.Fprintf(d.out, "drill: soak %s with no fault: epochs=%d->%d false_failovers=%d raft_heartbeat_timeouts=%d raft_lease_stepdowns=%d death_watch_elections=%d\n",
		time.Since(t0).Round(time.Second), e0, e1, e1-e0, timeouts, stepDowns, watched)
	return e1 - e0, nil
}

// finish stops the senders, waits until every node delivered the same
// stream, checks it and prints the final line.
func (d *drill) finish(ctx context.Context, rounds int, times []float64, nak string) error {
	senders := d.nodes[:3]
	for _, s := range senders {
		s.send("stop")
	}
	var lost, dup, diverged uint64
	for _, s := range senders {
		ok := false
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !ok; {
			for _, l := range s.snapshot() {
				if strings.HasPrefix(l, "drillnode: stopped ") {
					ok = true
				}
			}
			if err := d.sleep(ctx, 10*time.Millisecond); err != nil {
				return err
			}
		}
		if !ok {
			fmt.Fprintf(d.out, "drill: %s: commands still not acked a minute after it stopped sending\n", s.name)
		}
	}
	// Quiet now: wait until every node delivered the same last seq.
	var rs map[string]drillReport
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if rs, err = d.reports(ctx); err != nil {
			return err
		}
		same := true
		for _, r := range rs {
			same = same && r.last == rs["check"].last && r.last > 0
		}
		if same && len(rs) == len(d.nodes) || time.Now().After(deadline) {
			break
		}
		if err := d.sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	ref := rs["check"]
	var total uint64
	for _, s := range senders {
		r := rs[s.name]
		// Every command the sender saw acked is in the checker's stream
		// once (the checker counts repeats and gaps as dup and lost).
		if got := ref.senders[r.self]; got < r.acked {
			lost += r.acked - got
		}
		if r.sent > r.acked {
			lost += r.sent - r.acked
		}
		total += r.acked
	}
	for _, n := range d.nodes {
		r, ok := rs[n.name]
		if !ok {
			fmt.Fprintf(d.out, "drill: %s is not running\n", n.name)
			diverged++
			continue
		}
		lost += r.lost
		dup += r.dup
		if r.last != ref.last || r.digest != ref.digest {
			fmt.Fprintf(d.out, "drill: %s delivered last=%d digest=%s, the checker last=%d digest=%s\n", n.name, r.last, r.digest, ref.last, ref.digest)
			diverged++
		}
	}
	// A fresh reader rewinds the whole stream from seq 1 through the
	// replayer, across every epoch.
	out, err := exec.CommandContext(ctx, d.exe, append([]string{"node", "--read-only", "--expect", fmt.Sprint(total), "--replayer", nak, "--timeout", "2m"}, d.net...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("others=%d ", total)) {
		fmt.Fprintf(d.out, "drill: a reader from seq 1 did not get the %d commands: %v\n%s\n", total, err, lastLines(string(out), 5))
		lost++
	}
	sort.Float64s(times)
	if len(times) == 0 { // --rounds 0: a soak only
		times = []float64{0}
	}
	pct := func(q float64) float64 { return times[min(len(times)-1, int(q*float64(len(times))))] }
	_, epoch, _, _ := d.primary(ctx, 1, 0)
	fmt.Fprintf(d.out, "drill: commands=%d last_seq=%d epochs=%d fast_diverged_stops=%d\n", total, ref.last, epoch, d.fastStops)
	fmt.Fprintf(d.out, "drill failover rounds=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f lost=%d dup=%d diverged=%d\n",
		rounds, pct(0.5), pct(0.99), times[len(times)-1], lost, dup, diverged)
	if lost != 0 || dup != 0 || diverged != 0 {
		return errors.New("drill failover: the streams broke the contract (see above)")
	}
	return nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
