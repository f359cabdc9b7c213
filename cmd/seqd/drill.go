package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
)

func drillCommand() *cli.Command {
	return &cli.Command{
		Name:  "drill",
		Usage: "failover drills against real processes",
		Subcommands: []*cli.Command{{
			Name:  "failover",
			Usage: "SIGKILL the primary of a three-sequencer cluster under load, round after round, and time each failover",
			Description: `Starts three seqd sequencer --cluster processes (UDP multicast on
loopback, groups of their own, directories in a temporary directory). Each
round starts a sending node (seqd node --count C --rate R, safe mode)
and a fast-mode reader,
SIGKILLs the primary once the node is under way, times the kill to the
first record of the next epoch (the new primary's started_ns), waits for
the node to have every command acknowledged once (it verifies its stream:
dense, each sender once and in order) and the fast reader to get the same
stream or stop with ErrDiverged (counted in diverged=), restarts the killed member on its
directory and waits until it caught up as a standby. At the end a
read-only node rewinds the whole stream from seq 1 across every epoch.
Ends with
  drill failover rounds=N p50_ms=A p99_ms=B max_ms=C epochs=E lost=0 dup=0 diverged=0
and exits 1 if any check failed or any child died on its own.`,
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "rounds", Value: 20, Usage: "failovers"},
				&cli.IntFlag{Name: "count", Value: 8000, Usage: "commands of each round's node"},
				&cli.IntFlag{Name: "rate", Value: 4000, Usage: "commands per second of each round's node"},
				&cli.StringFlag{Name: "timeouts", Value: "lan", Usage: "the raft timing profile of the sequencers (lan, wan, test)"},
				&cli.BoolFlag{Name: "keep", Usage: "keep the directories and logs (printed at the end)"},
			},
			Action: runDrillFailover,
		}},
	}
}

// drillMember is one sequencer child process.
type drillMember struct {
	id     int
	args   []string
	admin  string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	lines  []string
	killed bool // the drill killed it: its exit is no failure
}

var drillPrimaryLine = regexp.MustCompile(`^sequencer: primary id=(\d+) epoch=(\d+) first_seq=(\d+) started_ns=(\d+)`)

func (m *drillMember) primaryEpochs() (epoch uint64, startedNS int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.lines {
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

type drill struct {
	exe     string
	dir     string
	net     []string
	members []*drillMember
	died    chan error // a child that exited on its own
}

func (d *drill) start(ctx context.Context, m *drillMember) error {
	logf, err := os.OpenFile(filepath.Join(d.dir, fmt.Sprintf("member-%d.log", m.id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	m.cmd = exec.CommandContext(ctx, d.exe, m.args...)
	m.cmd.Stderr = logf
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	m.exited = make(chan struct{})
	m.killed = false
	m.mu.Lock()
	m.lines = nil
	m.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			m.mu.Lock()
			m.lines = append(m.lines, sc.Text())
			m.mu.Unlock()
		}
		err := m.cmd.Wait()
		logf.Close()
		m.mu.Lock()
		killed := m.killed
		m.mu.Unlock()
		if !killed && ctx.Err() == nil {
			d.died <- fmt.Errorf("sequencer %d exited on its own (%v); its log: %s", m.id, err, logf.Name())
		}
		close(m.exited)
	}()
	return nil
}

func (d *drill) kill(m *drillMember) {
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

// primary waits for the live member that began the highest epoch >= min
// after the wall time after (ns).
func (d *drill) primary(ctx context.Context, min uint64, after int64) (*drillMember, uint64, int64, error) {
	for {
		var best *drillMember
		var be uint64
		var bns int64
		for _, m := range d.members {
			select {
			case <-m.exited:
				continue
			default:
			}
			if e, ns := m.primaryEpochs(); e >= min && e > be && ns > after {
				best, be, bns = m, e, ns
			}
		}
		if best != nil {
			return best, be, bns, nil
		}
		select {
		case err := <-d.died:
			return nil, 0, 0, err
		case <-ctx.Done():
			return nil, 0, 0, fmt.Errorf("no primary of epoch >= %d: %w", min, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// node runs a seqd node child to its end and returns its output.
func (d *drill) node(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, d.exe, append(append([]string{"node"}, args...), d.net...)...).CombinedOutput()
	return string(out), err
}

func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		a, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func runDrillFailover(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("drill failover", c.Args().Slice())
	}
	rounds, count, rate := c.Int("rounds"), c.Int("count"), c.Int("rate")
	if rounds < 1 || count < 1 || rate < 1 {
		return errors.New("drill failover: --rounds, --count and --rate must be >= 1")
	}
	if _, ok := cluster.Profiles[c.String("timeouts")]; !ok {
		return oneOf("timeouts", c.String("timeouts"), "lan", "wan", "test")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "seqd-drill")
	if err != nil {
		return err
	}
	if c.Bool("keep") {
		defer fmt.Printf("drill: directories and logs kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	port := 20000 + r.IntN(30000)
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	d := &drill{exe: exe, dir: dir, died: make(chan error, 8),
		net: []string{"--transport", "udp", "--udp.stream-group", fmt.Sprintf("239.83.%d.%d:%d", a, b, port), "--udp.command-group", fmt.Sprintf("239.84.%d.%d:%d", a, b, port+1)}}
	addrs, err := freeAddrs(9)
	if err != nil {
		return err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", i+1, addrs[3*i], addrs[3*i+1], addrs[3*i+2]))
	}
	for i := range 3 {
		m := &drillMember{id: i + 1, admin: addrs[3*i+1]}
		m.args = append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(m.id), "--dir", filepath.Join(dir, fmt.Sprint(m.id)),
			"--peers", strings.Join(peers, ","), "--timeouts", c.String("timeouts")}, d.net...)
		if err := d.start(ctx, m); err != nil {
			return err
		}
		d.members = append(d.members, m)
	}
	defer func() {
		cancel()
		for _, m := range d.members {
			<-m.exited
		}
	}()
	fmt.Printf("drill failover: 3 sequencers (%s timeouts), %d rounds, a node of %d commands at %d/s each round, logs in %s\n",
		c.String("timeouts"), rounds, count, rate, dir)

	var times []float64
	var epoch uint64 = 1
	diverged := 0 // fast nodes stopped with ErrDiverged: allowed, counted
	for round := 1; round <= rounds; round++ {
		old, e0, _, err := d.primary(ctx, epoch, 0)
		if err != nil {
			return err
		}
		account := fmt.Sprintf("DRILL%d", round)
		type result struct {
			out string
			err error
		}
		nodeDone, fastDone := make(chan result, 1), make(chan result, 1)
		go func() {
			out, err := d.node(ctx, "--account", account, "--count", fmt.Sprint(count), "--rate", fmt.Sprint(rate), "--size", "64", "--timeout", "2m")
			nodeDone <- result{out, err}
		}()
		// A fast-mode reader across the failover: it delivers on arrival,
		// so it either sees what the safe node sees or stops with
		// ErrDiverged when the cut drops a message it delivered.
		go func() {
			out, err := d.node(ctx, "--read-only", "--node.mode", "fast", "--expect", fmt.Sprint(round*count), "--timeout", "2m")
			fastDone <- result{out, err}
		}()
		// Under way: a quarter of the node's commands, at its rate.
		time.Sleep(time.Duration(count/4) * time.Second / time.Duration(rate))
		// The primary now (a loaded machine may have changed it).
		if old, e0, _, err = d.primary(ctx, epoch, 0); err != nil {
			return err
		}
		killed := time.Now()
		d.kill(old)
		p, e1, startedNS, err := d.primary(ctx, e0+1, killed.UnixNano())
		if err != nil {
			return err
		}
		ms := float64(startedNS-killed.UnixNano()) / 1e6
		times = append(times, ms)
		epoch = e1
		var res result
		select {
		case res = <-nodeDone:
		case err := <-d.died:
			return err
		}
		if res.err != nil || !strings.Contains(res.out, fmt.Sprintf("node: ok account=%s sent=%d acked=%d ", account, count, count)) {
			return fmt.Errorf("drill failover: round %d: node %s: %v\n%s", round, account, res.err, lastLines(res.out, 10))
		}
		select {
		case res = <-fastDone:
		case err := <-d.died:
			return err
		}
		fast := "identical"
		switch {
		case res.err == nil && strings.Contains(res.out, fmt.Sprintf("others=%d ", round*count)):
		case res.err != nil && strings.Contains(res.out, "diverged"):
			fast = "stopped with ErrDiverged"
			diverged++
		default:
			return fmt.Errorf("drill failover: round %d: fast node: %v\n%s", round, res.err, lastLines(res.out, 10))
		}
		fmt.Printf("drill: round %d: killed primary %d (epoch %d); %d is primary of epoch %d after %.1f ms; node acked %d/%d; fast node %s\n",
			round, old.id, e0, p.id, e1, ms, count, count, fast)
		// The killed member comes back on its directory and catches up.
		if err := d.start(ctx, old); err != nil {
			return err
		}
		if err := d.caughtUp(ctx, old); err != nil {
			return fmt.Errorf("drill failover: round %d: %w", round, err)
		}
	}
	total := rounds * count
	out, err := d.node(ctx, "--read-only", "--expect", fmt.Sprint(total), "--timeout", "2m")
	if err != nil || !strings.Contains(out, fmt.Sprintf("others=%d ", total)) {
		return fmt.Errorf("drill failover: a reader from seq 1 did not get the %d commands: %v\n%s", total, err, lastLines(out, 10))
	}
	sort.Float64s(times)
	pct := func(q float64) float64 { return times[min(len(times)-1, int(q*float64(len(times))))] }
	// lost and dup are 0 once every node passed its checks; diverged
	// counts the fast nodes that stopped with ErrDiverged (the contract
	// of fast mode), never a node that went on with a different stream.
	fmt.Printf("drill failover rounds=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f epochs=%d lost=0 dup=0 diverged=%d\n",
		rounds, pct(0.5), pct(0.99), times[len(times)-1], epoch, diverged)
	return nil
}

// caughtUp waits until member m is a standby holding what the primary
// (whichever member it is) published when the wait began.
func (d *drill) caughtUp(ctx context.Context, m *drillMember) error {
	deadline := time.Now().Add(time.Minute)
	var want uint64
	for time.Now().Before(deadline) {
		select {
		case err := <-d.died:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, o := range d.members {
			if want == 0 && o != m {
				if st, err := cluster.FetchStatus(qctx, o.admin); err == nil && st.Role == cluster.RolePrimary.String() {
					want = st.Published
				}
			}
		}
		ms, err := cluster.FetchStatus(qctx, m.admin)
		cancel()
		if err == nil && want > 0 && ms.Role == cluster.RoleStandby.String() && ms.Contiguous >= want {
			return nil
		}
	}
	return fmt.Errorf("restarted member %d did not catch up to %d within a minute", m.id, want)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
