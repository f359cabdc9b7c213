package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/freeport"
)

// HotHotConfig is one hot-hot drill (`seqd drill hothot`).
type HotHotConfig struct {
	// Rounds is how many faults of the active instance.
	Rounds int
	// RatePerSecond is the buyers per second (a crowd every 100 ms, each
	// buyer one reservation through the inventory front).
	RatePerSecond int
	// Stock is the items restocked first (buyers beyond it are refused,
	// 409 sold out).
	Stock int64
	// ActiveTimeout is the sequencers' sequencer.active-timeout.
	ActiveTimeout time.Duration
	// Pause is the load before each fault.
	Pause time.Duration
	// Seed seeds the multicast groups (0: from the clock; printed).
	Seed uint64
	// Keep keeps the directories and logs (printed at the end).
	Keep bool
	// Exe is the seqd binary the children run; empty: this process's own.
	Exe string
	// Out receives the drill's lines; nil: os.Stdout.
	Out io.Writer
}

// DefaultHotHotConfig is `seqd drill hothot` with no flags.
func DefaultHotHotConfig() HotHotConfig {
	return HotHotConfig{Rounds: 20, RatePerSecond: 200, Stock: 2000, ActiveTimeout: 250 * time.Millisecond, Pause: 700 * time.Millisecond}
}

// Validate checks the counts and durations.
func (c HotHotConfig) Validate() error {
	switch {
	case c.Rounds < 1:
		return config.New(ErrConfig, "Rounds", c.Rounds, ">= 1")
	case c.RatePerSecond < 1:
		return config.New(ErrConfig, "RatePerSecond", c.RatePerSecond, ">= 1")
	case c.Stock < 0:
		return config.New(ErrConfig, "Stock", c.Stock, ">= 0")
	case c.ActiveTimeout < 20*time.Millisecond:
		return config.New(ErrConfig, "ActiveTimeout", c.ActiveTimeout, ">= 20ms")
	case c.Pause < 0:
		return config.New(ErrConfig, "Pause", c.Pause, ">= 0")
	}
	return nil
}

const shopAccount, loadAccount = "SHOP", "LOAD"

var (
	hotLiveLine   = regexp.MustCompile(`^hotnode: live seq=(\d+) active=(true|false)`)
	hotStateLine  = regexp.MustCompile(`^hotnode: (active|passive) ns=(\d+)`)
	hotFirstLine  = regexp.MustCompile(`^hotcheck: first instance=(\d+) seq=(\d+) ns=(\d+)`)
	hotDigestLine = regexp.MustCompile(`^hotnode: digest seq=(\d+) d=([0-9a-f]+)`)
	hotReportLine = regexp.MustCompile(`^hotcheck: report last=(\d+) orders=(\d+) unanswered=(\d+) dup=(\d+) sold=(\d+) oversold=(\d+) outside=(\d+) fenced=(\d+)`)
)

// hotDrill is the hot-hot drill's state on top of a drill's children.
type hotDrill struct {
	*drill
	pair  [2]*drillProc // instances 1 and 2
	load  *drillProc
	check *drillProc
	// lines of earlier incarnations of each instance (digests), kept
	// across restarts.
	past [2][]string
	// gossip is the checker's gossip address, the seed of the instances.
	gossip string
	// front is the load's base URL; buyers sums up the buyers' answers.
	front  string
	bmu    sync.Mutex
	buyers inventory.BuyersReport
}

// isActive reports whether instance p's running process last said it is
// active (its live line, then its activation lines).
func (h *hotDrill) isActive(p *drillProc) bool {
	active := false
	for _, l := range p.snapshot() {
		if s := hotLiveLine.FindStringSubmatch(l); s != nil {
			active = s[2] == "true"
		} else if s := hotStateLine.FindStringSubmatch(l); s != nil {
			active = s[1] == "active"
		}
	}
	return active
}

// waitActive waits until exactly one instance's running process says it
// is active and returns its index.
func (h *hotDrill) waitActive(ctx context.Context, within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		a, b := h.pair[0].alive() && h.isActive(h.pair[0]), h.pair[1].alive() && h.isActive(h.pair[1])
		if a != b {
			if a {
				return 0, nil
			}
			return 1, nil
		}
		if err := h.sleep(ctx, 5*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no single active instance within %v", within)
}

// firstAfter waits until the checker saw the first command of instance
// i (1 or 2) after its activation, at or after wall time t0 (ns), and
// returns that time.
func (h *hotDrill) firstAfter(ctx context.Context, p *drillProc, i int, t0 int64, within time.Duration) (int64, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, l := range h.check.snapshot() {
			if s := hotFirstLine.FindStringSubmatch(l); s != nil && s[1] == strconv.Itoa(i) {
				if ns, _ := strconv.ParseInt(s[3], 10, 64); ns >= t0 {
					return ns, nil
				}
			}
		}
		if err := h.sleep(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("%s sent no command as the new active within %v", p.name, within)
}

// waitLive waits until p's running process caught up with the live stream.
func (h *hotDrill) waitLive(ctx context.Context, p *drillProc, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, l := range p.snapshot() {
			if hotLiveLine.MatchString(l) {
				return nil
			}
		}
		if err := h.sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not catch up with the live stream within %v", p.name, within)
}

// RunHotHot runs the hot-hot drill (the `seqd drill hothot` help says
// what it does) and fails when a child dies on its own or the pair broke
// the contract.
func RunHotHot(ctx context.Context, cfg HotHotConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	st, err := begin(ctx, cfg.Out, cfg.Seed, cfg.Exe, cfg.Keep, "drill hothot", "seqd-hothot", 0x407, 85, 1)
	if err != nil {
		return err
	}
	defer st.end()
	d, ctx, seed, dir, out := st.d, st.ctx, st.seed, st.d.dir, st.d.out
	addrs, err := freeport.Addrs(15)
	if err != nil {
		return err
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d@%s@%s@%s", i+1, addrs[4*i], addrs[4*i+1], addrs[4*i+2]))
	}
	for i := range 3 {
		m := &drillProc{name: fmt.Sprintf("sequencer-%d", i+1), id: i + 1, admin: addrs[4*i+1]}
		m.args = append([]string{"sequencer", "--cluster", "--id", fmt.Sprint(m.id), "--dir", filepath.Join(dir, fmt.Sprint(m.id)),
			"--peers", strings.Join(peers, ","), "--timeouts", "lan", "--sequencer.active-timeout", cfg.ActiveTimeout.String()}, d.net...)
		if err := d.start(ctx, m); err != nil {
			return err
		}
		d.members = append(d.members, m)
	}
	fmt.Fprintf(out, "drill hothot: seed=%d, 3 sequencers (active-timeout %v), a replayer, a pair of %s inventory instances (SQLite; stock %d), an inventory front and %d buyers/s, a checker; %d rounds; logs in %s\n",
		seed, cfg.ActiveTimeout, shopAccount, cfg.Stock, cfg.RatePerSecond, cfg.Rounds, dir)
	if _, _, _, err := d.primary(ctx, 1, 0); err != nil {
		return err
	}
	nak := addrs[12]
	rep := &drillProc{name: "replayer", args: append([]string{"replayer", "--dir", filepath.Join(dir, "replayer"), "--nak-addr", nak}, d.net...)}
	if err := d.start(ctx, rep); err != nil {
		return err
	}
	h := &hotDrill{drill: d}
	hot := func(extra ...string) []string {
		return append(append([]string{"drill", "hotnode", "--replayer", nak, "--load", loadAccount, "--stock", fmt.Sprint(cfg.Stock)}, extra...), d.net...)
	}
	for i := range 2 {
		h.pair[i] = &drillProc{name: fmt.Sprintf("shop-%d", i+1), args: hot("--account", shopAccount, "--instance", fmt.Sprint(i+1),
			"--db", filepath.Join(dir, fmt.Sprintf("shop-%d.db", i+1)))}
	}
	// Gossip: the checker (never faulted) is the seed the instances join.
	gossip := addrs[13]
	h.gossip = gossip
	for _, p := range h.pair {
		p.args = append(p.args, "--gossip", gossip)
	}
	h.check = &drillProc{name: "check", args: hot("--account", shopAccount, "--check", "--gossip.bind", gossip)}
	h.front = "http://" + addrs[14]
	h.load = &drillProc{name: "front", args: hot("--account", loadAccount, "--front", addrs[14])}
	// The first instance first, so that it is the first active one.
	for _, p := range []*drillProc{h.pair[0], h.check, h.pair[1], h.load} {
		if err := d.start(ctx, p); err != nil {
			return err
		}
		if p == h.pair[0] {
			if err := h.waitLive(ctx, p, 30*time.Second); err != nil {
				return err
			}
		}
	}
	if err := h.waitLive(ctx, h.pair[1], 30*time.Second); err != nil {
		return err
	}
	if err := h.restock(ctx, cfg.Stock); err != nil {
		return err
	}
	if _, err := h.waitActive(ctx, 30*time.Second); err != nil {
		return err
	}
	stopBuyers := make(chan struct{})
	buyersDone := make(chan struct{})
	go h.runBuyers(ctx, cfg.RatePerSecond, stopBuyers, buyersDone)
	defer func() {
		select {
		case <-stopBuyers:
		default:
			close(stopBuyers)
		}
		<-buyersDone
	}()
	var times []float64
	for round := 1; round <= cfg.Rounds; round++ {
		if err := h.sleep(ctx, cfg.Pause); err != nil {
			return err
		}
		ai, err := h.waitActive(ctx, 10*time.Second)
		if err != nil {
			return fmt.Errorf("drill hothot: round %d: %w", round, err)
		}
		act, partner := h.pair[ai], h.pair[1-ai]
		kind := "kill"
		switch {
		case round%5 == 0:
			kind = "pause"
		case round%3 == 0:
			kind = "force-passive"
		}
		t0 := time.Now()
		switch kind {
		case "kill":
			h.past[ai] = append(h.past[ai], act.snapshot()...)
			d.kill(act)
		case "pause":
			_ = syscall.Kill(act.p.Pid(), syscall.SIGSTOP)
		case "force-passive":
			o, err := exec.CommandContext(ctx, d.exe, "admin", "force-passive", "--addr", d.members[0].admin, shopAccount, fmt.Sprint(ai+1)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("drill hothot: round %d: seqd admin force-passive: %v: %s", round, err, o)
			}
		}
		at, err := h.firstAfter(ctx, partner, 2-ai, t0.UnixNano(), 30*time.Second)
		if err != nil {
			return fmt.Errorf("drill hothot: round %d (%s): %w", round, kind, err)
		}
		ms := float64(at-t0.UnixNano()) / 1e6
		times = append(times, ms)
		switch kind {
		case "kill":
			// The killed instance comes back as the new passive: it
			// loads its database and rewinds from the flushed seq + 1.
			if err := d.start(ctx, act); err != nil {
				return err
			}
			if err := h.waitLive(ctx, act, time.Minute); err != nil {
				return fmt.Errorf("drill hothot: round %d: %w", round, err)
			}
			for _, l := range act.snapshot() {
				if rest, ok := strings.CutPrefix(l, "hotnode: ready "); ok {
					fmt.Fprintf(out, "drill: round %d restarted %s from its database: %s\n", round, act.name, rest)
				}
			}
		case "pause":
			if rest := 2*cfg.ActiveTimeout - time.Since(t0); rest > 0 {
				if err := h.sleep(ctx, rest); err != nil {
					return err
				}
			}
			_ = syscall.Kill(act.p.Pid(), syscall.SIGCONT)
		}
		if _, err := h.waitActive(ctx, 10*time.Second); err != nil {
			return fmt.Errorf("drill hothot: round %d (%s) after the switch: %w", round, kind, err)
		}
		fmt.Fprintf(out, "drill: round %d fault=%s old=%s new=%s switch_ms=%.1f\n", round, kind, act.name, partner.name, ms)
	}
	close(stopBuyers)
	<-buyersDone
	return h.finish(ctx, cfg, times)
}

// restock puts stock items of hotKey on sale through the front (retried
// until the front is up and answers).
func (h *hotDrill) restock(ctx context.Context, stock int64) error {
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/restock?key=%s&qty=%d", h.front, hotKey, stock), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		if err := h.sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("drill hothot: restock through the front: %w", last)
}

// runBuyers storms the front with a crowd of buyers every 100 ms (rate
// per second in all), each one reservation of one item, until stop, and
// sums up their answers.
func (h *hotDrill) runBuyers(ctx context.Context, rate int, stop, done chan struct{}) {
	defer close(done)
	crowd := max(1, rate/10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r := inventory.RunBuyers(ctx, inventory.BuyersConfig{URLs: []string{h.front}, Buyers: crowd, Keys: []string{hotKey}, Qty: 1, Timeout: 30 * time.Second})
		h.bmu.Lock()
		h.buyers.Won += r.Won
		h.buyers.Refused += r.Refused
		h.buyers.Timeouts += r.Timeouts
		h.buyers.Errors += r.Errors
		h.buyers.Results = append(h.buyers.Results, r.Results...)
		h.bmu.Unlock()
	}
}

// finish stops the load, waits until the checker saw every order
// answered (or a deadline), compares the instances' digests and prints
// the final line.
func (h *hotDrill) finish(ctx context.Context, cfg HotHotConfig, times []float64) error {
	// Every buyer got one answer, a sale (200) or sold out (409): a
	// timeout or an error is a lost order.
	h.bmu.Lock()
	b := h.buyers
	h.bmu.Unlock()
	unanswered := uint64(b.Timeouts + b.Errors)
	fmt.Fprintf(h.out, "drill: buyers=%d won=%d refused=%d timeouts=%d errors=%d\n", len(b.Results), b.Won, b.Refused, b.Timeouts, b.Errors)
	if len(b.Results) == 0 || b.Won+b.Refused+int(unanswered) != len(b.Results) {
		fmt.Fprintf(h.out, "drill: no buyers, or answers that are neither a sale nor sold out\n")
		unanswered++
	}
	var rep []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		from := len(h.check.snapshot())
		h.check.send("report")
		got, err := h.check.p.Await(ctx, hotReportLine, from, "the checker's report")
		if err != nil {
			return err
		}
		rep = got
		if rep[3] == "0" || time.Now().After(deadline) {
			break
		}
		if err := h.sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	n := func(i int) uint64 { v, _ := strconv.ParseUint(rep[i], 10, 64); return v }
	lost, dup, oversold, outside := n(3)+unanswered, n(4), n(6), n(7)
	if n(5) != uint64(b.Won) {
		fmt.Fprintf(h.out, "drill: the stream sold %d items, the buyers won %d\n", n(5), b.Won)
		dup++
	}
	// Both instances' digests, every incarnation, at each seq both applied.
	digests := map[uint64]map[string]bool{}
	applied := [2]map[uint64]bool{{}, {}}
	for i, p := range h.pair {
		for _, l := range append(append([]string(nil), h.past[i]...), p.snapshot()...) {
			if s := hotDigestLine.FindStringSubmatch(l); s != nil {
				seq, _ := strconv.ParseUint(s[1], 10, 64)
				if digests[seq] == nil {
					digests[seq] = map[string]bool{}
				}
				digests[seq][s[2]] = true
				applied[i][seq] = true
			}
		}
	}
	var diverged, compared uint64
	for seq, ds := range digests {
		if applied[0][seq] && applied[1][seq] {
			compared++
		}
		if len(ds) > 1 {
			diverged++
			fmt.Fprintf(h.out, "drill: instances diverged at seq %d: digests %v\n", seq, ds)
		}
	}
	if outside > 0 {
		fmt.Fprintf(h.out, "drill: %d commands of the pair entered the stream from an instance that was not active\n", outside)
		dup += outside
	}
	// The operator's view: seqd admin status lists the pair and its
	// active instance, as the primary holds them, and, through gossip,
	// both instances with one of them active. Each instance re-announces
	// its Meta at once when its activation changes (tiered.Agent.Refresh;
	// before, up to a MetaInterval of a second later), but an idle pair's
	// activation may still move (the sequencer's silence switch) and a
	// killed instance stays listed until gossip declares it dead: a few
	// tries, each reported.
	for try := 1; ; try++ {
		msg, err := h.adminStatus(ctx)
		if err == nil {
			break
		}
		fmt.Fprintf(h.out, "drill: admin status, try %d: %v\n%s", try, err, msg)
		if try == 3 {
			diverged++
			break
		}
		if err := h.sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	// The status page (each member's /ui/) shows the pair too.
	if err := pageShowsPair(ctx, h.members[0].admin, shopAccount); err != nil {
		fmt.Fprintf(h.out, "drill: the status page: %v\n", err)
		diverged++
	}
	if compared == 0 {
		fmt.Fprintf(h.out, "drill: no seq at which both instances printed a digest\n")
	}
	sort.Float64s(times)
	pct := func(q float64) float64 { return times[min(len(times)-1, int(q*float64(len(times))))] }
	fmt.Fprintf(h.out, "drill: orders=%d sold=%d last_seq=%s fenced=%s digests_compared=%d\n", n(2), n(5), rep[1], rep[8], compared)
	fmt.Fprintf(h.out, "drill hothot rounds=%d p50_ms=%.1f max_ms=%.1f lost=%d dup=%d oversold=%d diverged=%d\n",
		len(times), pct(0.5), times[len(times)-1], lost, dup, oversold, diverged)
	if lost != 0 || dup != 0 || oversold != 0 || diverged != 0 || compared == 0 {
		return errors.New("drill hothot: the pair broke the contract (see above)")
	}
	return nil
}

// adminStatus runs seqd admin status (the primary's pairs and the
// gossip's instances), prints the pair's lines, and fails unless the
// primary lists the pair and gossip both instances, one of them active;
// it returns the output with the error.
func (h *hotDrill) adminStatus(ctx context.Context) (string, error) {
	o, err := exec.CommandContext(ctx, h.exe, "admin", "status", "--addr", h.members[0].admin, "--gossip", h.gossip, "--gossip.wait", "3s").CombinedOutput()
	if err != nil {
		return string(o), fmt.Errorf("seqd admin status: %w", err)
	}
	// A killed process stays listed until gossip's failure detector
	// declares it dead: per instance, the most advanced entry is the
	// live process.
	type entry struct {
		active  bool
		applied uint64
	}
	latest := map[string]entry{}
	listed := false
	for _, l := range strings.Split(string(o), "\n") {
		f := strings.Fields(l)
		if strings.HasPrefix(l, shopAccount+" ") {
			listed = true
			fmt.Fprintf(h.out, "drill: admin status: %s\n", strings.Join(f, " "))
		}
		if len(f) == 5 && f[1] == shopAccount {
			applied, _ := strconv.ParseUint(f[4], 10, 64)
			if e, ok := latest[f[2]]; !ok || applied >= e.applied {
				latest[f[2]] = entry{active: f[3] == "active", applied: applied}
			}
			fmt.Fprintf(h.out, "drill: admin status (gossip): %s\n", strings.Join(f, " "))
		}
	}
	instances, active := len(latest), 0
	for _, e := range latest {
		if e.active {
			active++
		}
	}
	if !listed || instances != 2 || active != 1 {
		return string(o), fmt.Errorf("it does not list the pair (primary: %v; gossip: %d instances, %d active)", listed, instances, active)
	}
	return "", nil
}

// pageShowsPair asks the status page at admin for its data and checks
// that it lists the hot-hot account with an active instance among its
// two instances.
func pageShowsPair(ctx context.Context, admin, account string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/ui/status.json", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var st struct {
		Pairs []struct {
			Account   string   `json:"account"`
			Active    uint64   `json:"active"`
			Instances []uint64 `json:"instances"`
		} `json:"pairs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("status.json: %w", err)
	}
	for _, p := range st.Pairs {
		if p.Account == account {
			if len(p.Instances) != 2 || !slices.Contains(p.Instances, p.Active) {
				return fmt.Errorf("pair %s shown with instances %v, active %d", account, p.Instances, p.Active)
			}
			return nil
		}
	}
	return fmt.Errorf("no pair %s among %+v", account, st.Pairs)
}
