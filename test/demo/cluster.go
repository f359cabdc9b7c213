package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
)

// demoMember is one sequencer of the demo's Raft group.
type demoMember struct {
	id     uint64
	node   *cluster.Member
	p      *cluster.Process
	cancel context.CancelFunc
	done   chan error
	dead   bool
}

// runCluster runs three sequencers in a Raft group and nodes, all in
// this process, over UDP multicast on loopback (real sockets, groups of
// their own); after killFrac of the commands are acknowledged it kills the
// primary (its Raft and standby stop, as in a crash), shows the new epoch
// and primary, and goes on until every node acknowledged everything. Each
// node checks its stream (no gap, no repeat, each sender in order) and
// the streams are compared by digest.
func runCluster(ctx context.Context, out io.Writer, nodes, count, rate int, timeouts string) error {
	prof, ok := cluster.Profiles[timeouts]
	if !ok {
		return fmt.Errorf("demo: --timeouts %q: want lan, wan or test", timeouts)
	}
	dir, err := os.MkdirTemp("", "seqd-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	mc := multicast.DefaultConfig()
	port := freeport.GroupPortsOr(4, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	mc.StreamGroup = fmt.Sprintf("239.81.%d.%d:%d", a, b, port)
	mc.CommandGroup = fmt.Sprintf("239.82.%d.%d:%d", a, b, port+1)
	mc.ReadBufferBytes = 16 << 20
	// Site B, across the bridge, has groups of its own.
	mcB := mc
	mcB.StreamGroup = fmt.Sprintf("239.83.%d.%d:%d", a, b, port+2)
	mcB.CommandGroup = fmt.Sprintf("239.84.%d.%d:%d", a, b, port+3)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(out, "demo: 3 sequencers (raft, %s timeouts), %d nodes, %d commands each at %d/s, udp multicast %s on lo\n", timeouts, nodes, count, rate, mc.StreamGroup)
	fmt.Fprintf(out, "demo: a bridge (one tcp and one udp channel) carries the stream to site B (%s), where a read-only node delivers it\n", mcB.StreamGroup)
	fmt.Fprintf(out, "demo: a hot-hot pair %s (instances 1 and 2) answers every 100th command of %s; its active instance is stopped two thirds in, after the failover\n", pairName, triggerName)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var members []fsm.Member
	for id := uint64(1); id <= 3; id++ {
		m := fsm.Member{ID: id, Role: fsm.Voter}
		for _, p := range []*string{&m.RaftAddr, &m.AdminAddr, &m.StreamAddr} {
			if *p, err = freeport.Addr(); err != nil {
				return err
			}
		}
		members = append(members, m)
	}
	var stream sync.Mutex // one stream server at a time in this process
	ms := make([]*demoMember, 0, 3)
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	for i, mem := range members {
		cfg := cluster.DefaultMemberConfig()
		cfg.ID, cfg.Dir, cfg.RaftAddr, cfg.AdminAddr, cfg.Members = mem.ID, filepath.Join(dir, fmt.Sprint(mem.ID)), mem.RaftAddr, mem.AdminAddr, members
		cfg.Timeouts = prof()
		cfg.Sequencer.ActiveTimeout = pairActiveTimeout
		cfg.Logger = log
		cfg.RaftLog = io.Discard // a dead member's peers complain every heartbeat
		mcc := mc
		mcc.FaultStream = uint64(i + 1)
		data := cluster.DefaultDataConfig() // as seqd sequencer --cluster runs
		data.Dir, data.PeerAddr = filepath.Join(cfg.Dir, "stream"), mem.StreamAddr
		p, err := cluster.NewProcess(cfg, data, cluster.Opens{
			Client: func() (transport.Client, error) { return multicast.NewClient(mcc) },
			Server: func() (transport.Server, error) {
				stream.Lock()
				defer stream.Unlock()
				return multicast.NewServer(mc)
			},
		})
		if err != nil {
			return err
		}
		m := &demoMember{id: mem.ID, node: p.Member, p: p, done: make(chan error, 1)}
		mctx, mcancel := context.WithCancel(ctx)
		m.cancel = mcancel
		go func() { m.done <- p.Run(mctx) }()
		ms = append(ms, m)
	}
	// primary waits for a live member sequencing an epoch >= minEpoch
	// that it began after the wall time after (ns).
	primary := func(minEpoch uint64, after int64, deadline time.Duration) (*demoMember, uint64, error) {
		until := time.Now().Add(deadline)
		for time.Now().Before(until) {
			for _, m := range ms {
				if !m.dead && m.node.Role() == cluster.RolePrimary && m.node.State().Epoch() >= minEpoch && m.node.Status().StartedAt > after {
					return m, m.node.State().Epoch(), nil
				}
			}
			time.Sleep(time.Millisecond)
		}
		return nil, 0, fmt.Errorf("demo: no primary of epoch >= %d after %v", minEpoch, deadline)
	}
	p, e, err := primary(1, 0, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo: sequencer %d is primary of epoch %d\n", p.id, e)
	rp, err := startDemoReplayer(ctx, filepath.Join(dir, "replayer"), mc, log)
	if err != nil {
		return err
	}
	defer rp.stop()
	fmt.Fprintf(out, "demo: replayer stores the stream in %s and answers NAKs on %s\n", rp.dir, rp.nakAddr)
	br, err := startDemoBridge(ctx, filepath.Join(dir, "bridge"), mc, mcB, rp.nakAddr, &stream, log)
	if err != nil {
		return fmt.Errorf("demo: bridge: %w", err)
	}
	defer br.close()
	var pair [2]*pairInstance
	for i := range pair {
		if pair[i], err = startPairInstance(ctx, uint8(i+1), mc, rp.nakAddr); err != nil {
			return fmt.Errorf("demo: pair instance %d: %w", i+1, err)
		}
		defer pair[i].stop()
	}

	ds := make([]*demoNode, nodes)
	var wg sync.WaitGroup
	nodeErr := make(chan error, 2*nodes)
	for i := range ds {
		d := newDemoNode(fmt.Sprintf("DEMO%d", i))
		ncfg := node.DefaultConfig()
		ncfg.Account = d.name
		ncfg.Rewind = true
		ncfg.BlockWhenFull = true
		ncfg.Replayers = []string{rp.nakAddr}
		mcc := mc
		mcc.FaultStream = uint64(100 + i)
		cl, err := multicast.NewClient(mcc)
		if err != nil {
			return err
		}
		defer cl.Close()
		if d.n, err = node.New(ncfg, d, cl); err != nil {
			return err
		}
		ds[i] = d
		wg.Add(2)
		go d.run(ctx, &wg, nodeErr)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			for k := 0; k < count && ctx.Err() == nil; k++ {
				if rate > 0 && k%50 == 0 {
					// Paced, so that the failover happens under load, a
					// few seconds in.
					if ahead := time.Duration(k)*time.Second/time.Duration(rate) - time.Since(t0); ahead > 0 {
						time.Sleep(ahead)
					}
				}
				if _, err := d.n.SendContext(ctx, []byte(fmt.Sprintf("%s order %d", d.name, k))); err != nil && ctx.Err() == nil {
					nodeErr <- fmt.Errorf("%s send: %w", d.name, err)
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	start := time.Now()
	failovers := 0
	var failoverMS float64
	var stopped, took *pairInstance
	var takeoverMS float64
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !demoDone(ds, count) {
		select {
		case err := <-nodeErr:
			return err
		case err := <-br.errs:
			return err
		case <-deadline:
			return fmt.Errorf("demo: no convergence after 3m: %s", demoProgress(ds))
		case <-tick.C:
		}
		for _, m := range ms {
			select {
			case err := <-m.done:
				if !m.dead {
					return fmt.Errorf("demo: sequencer %d stopped: %w", m.id, err)
				}
			default:
			}
		}
		if failovers == 0 && demoAcked(ds) >= nodes*count/3 {
			// Kill the primary as a crash would: its raft and standby
			// stop, the others hear nothing more from it.
			// The primary now (a loaded machine may have changed it).
			if p, e, err = primary(1, 0, 30*time.Second); err != nil {
				return err
			}
			killed := time.Now()
			p.dead = true
			p.stop()
			q, e2, err := primary(e+1, killed.UnixNano(), 30*time.Second)
			if err != nil {
				return err
			}
			failovers++
			failoverMS = float64(q.node.Status().StartedAt-killed.UnixNano()) / 1e6
			ch := q.node.LastChange()
			fmt.Fprintf(out, "demo: killed primary %d (epoch %d); sequencer %d is primary of epoch %d from seq %d, %.1f ms after the kill (seal %.1f ms, commit %.1f ms after its election)\n",
				p.id, e, q.id, e2, ch.Cut+1, failoverMS, float64(ch.SealUS)/1000, float64(ch.CommitUS)/1000)
			p, e = q, e2
		}
		if failovers == 1 && stopped == nil && demoAcked(ds) >= 2*nodes*count/3 {
			// Stop the pair's active instance (its node ends: no more
			// commands or heartbeats); the sequencer makes the partner
			// active after its active-timeout.
			if stopped, took, takeoverMS, err = stopActive(pair); err != nil {
				return err
			}
			fmt.Fprintf(out, "demo: hot-hot pair %s: instance %d stopped, instance %d active after %.1f ms\n", pairName, stopped.inst, took.inst, takeoverMS)
		}
		for _, in := range pair {
			if e := in.sendErr.Load(); e != nil {
				return fmt.Errorf("demo: pair instance %d send: %w", in.inst, *e)
			}
		}
	}
	elapsed := time.Since(start)
	if stopped == nil {
		return errors.New("demo: the pair's active instance was not stopped")
	}
	// The pair answers the last triggers after the nodes are done.
	until := time.Now().Add(10 * time.Second)
	for time.Now().Before(until) {
		if t, _, lost, _, _, _ := ds[0].pair.result(); t > 0 && lost == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The stream is complete once every node acked all; wait for all to
	// deliver the same last seq.
	until = time.Now().Add(10 * time.Second)
	for !demoSameLast(ds) && time.Now().Before(until) {
		time.Sleep(5 * time.Millisecond)
	}
	// The primary at the end (a loaded machine may have changed it since
	// the kill; every change is an epoch).
	if p, _, err = primary(1, 0, 10*time.Second); err != nil {
		return err
	}
	sequenced := p.node.Status().Published
	var lost, dup, diverged uint64
	for _, d := range ds {
		d.mu.Lock()
		lost += d.check.Lost
		dup += d.check.Dup
		if d.check.Digest != ds[0].check.Digest || d.check.Last != ds[0].check.Last {
			diverged++
		}
		d.mu.Unlock()
	}
	fmt.Fprintf(out, "demo: %d commands in %v, epochs=%d\n", nodes*count, elapsed.Round(time.Millisecond), p.node.State().Epoch())
	ds[0].mu.Lock()
	want, wantDigest := ds[0].check.Last, ds[0].check.Digest
	ds[0].mu.Unlock()
	archived, err := rp.replayAll(want, ds[0].check.Digest)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo: the replayer's archive replays to the nodes' stream: %d messages, same digest\n", archived)
	bridged, bridgeOK := br.delivered(want, wantDigest, 10*time.Second)
	same := "same digest"
	if !bridgeOK {
		same = "DIFFERENT stream"
	}
	fmt.Fprintf(out, "demo: site B (through a bridge over tcp+udp) delivered %d messages, %s\n", bridged, same)
	triggers, pairCmds, pairLost, pairDup, pairStray, runs := ds[0].pair.result()
	// One instance's commands at a time: runs of one instance each, the
	// stopped one's before the partner's last.
	pairOK := triggers == uint64(count/100) && pairLost == 0 && pairDup == 0 && pairStray == 0 && len(runs) > 0 && runs[len(runs)-1] == took.inst
	fmt.Fprintf(out, "demo: hot-hot pair %s: %d commands for %d triggers, lost=%d dup=%d, one instance at a time (runs of instances %v)\n",
		pairName, pairCmds, triggers, pairLost, pairDup, runs)
	status := "ok"
	if lost != 0 || dup != 0 || diverged != 0 || failovers != 1 || want != sequenced || archived != want || wantDigest != ds[0].check.Digest || !bridgeOK || !pairOK {
		status = "FAILED"
	}
	fmt.Fprintf(out, "demo: %s sequenced=%d delivered=%d nodes=%d failovers=%d lost=%d dup=%d diverged=%d failover_ms=%.1f archived=%d bridged=%d pair_cmds=%d pair_lost=%d pair_dup=%d takeover_ms=%.1f\n",
		status, sequenced, want, nodes, failovers, lost, dup, diverged, failoverMS, archived, bridged, pairCmds, pairLost, pairDup, takeoverMS)
	if status != "ok" {
		return errors.New("demo: streams differ, the failover did not happen, site B's stream differs or the pair lost or doubled a command")
	}
	return nil
}

func (m *demoMember) stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
		m.p.Close()
	}
}

func demoAcked(ds []*demoNode) int {
	n := 0
	for _, d := range ds {
		d.mu.Lock()
		n += d.acked
		d.mu.Unlock()
	}
	return n
}

func demoSameLast(ds []*demoNode) bool {
	ds[0].mu.Lock()
	last := ds[0].check.Last
	ds[0].mu.Unlock()
	for _, d := range ds[1:] {
		d.mu.Lock()
		l := d.check.Last
		d.mu.Unlock()
		if l != last {
			return false
		}
	}
	return true
}

// demoReplayer is the demo's replayer: a replayer.Service in this process
// following the stream, persisting it and answering the nodes' NAKs.
type demoReplayer struct {
	dir, nakAddr string
	svc          *replayer.Service
	cancel       context.CancelFunc
	done         chan error
	follow       transport.Client
	srv          transport.Server
}

func startDemoReplayer(ctx context.Context, dir string, mc multicast.Config, log *slog.Logger) (*demoReplayer, error) {
	nakAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	cfg := replayer.DefaultServiceConfig()
	cfg.Dir = dir
	cfg.Logger = log
	mcc := mc
	mcc.FaultStream = 200
	follow, err := multicast.NewClient(mcc)
	if err != nil {
		return nil, err
	}
	srv, err := multicast.NewRepairServer(mc, nakAddr)
	if err != nil {
		follow.Close()
		return nil, err
	}
	svc, err := replayer.NewService(cfg, follow, srv)
	if err != nil {
		follow.Close()
		srv.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &demoReplayer{dir: dir, nakAddr: nakAddr, svc: svc, cancel: cancel, done: make(chan error, 1), follow: follow, srv: srv}
	go func() { r.done <- svc.Run(rctx) }()
	return r, nil
}

// stop ends the service (its store fsynced and closed) and its sockets.
func (r *demoReplayer) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	err := <-r.done
	r.follow.Close()
	r.srv.Close()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// replayAll waits until the replayer holds the stream up to last, stops
// it, and replays its directory as an archive (node.Replay, as `seqd
// replay` does), checking the messages and digest against a node's.
func (r *demoReplayer) replayAll(last, digest uint64) (uint64, error) {
	until := time.Now().Add(10 * time.Second)
	for r.svc.Contiguous() < last && time.Now().Before(until) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		return 0, fmt.Errorf("demo: replayer: %w", err)
	}
	h := newDemoNode("")
	if err := node.Replay(r.dir, 1, last, h); err != nil {
		return 0, fmt.Errorf("demo: replaying the replayer's archive: %w", err)
	}
	if k := h.check; k.Lost != 0 || k.Dup != 0 || k.Digest != digest {
		return 0, fmt.Errorf("demo: the replayer's archive differs from the nodes' stream (last %d of %d, lost %d, dup %d)", k.Last, last, k.Lost, k.Dup)
	}
	return h.check.Last, nil
}
