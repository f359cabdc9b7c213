package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/test/bench"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/wire"
)

// `seqd drill node` is the node process of a failover drill (hidden: the
// drill starts it from its own binary). It reads the stream from seq 1
// and counts, instead of stopping at, what a drill checks: seqs skipped
// or repeated, each sender's commands lost or repeated, and a digest of
// the whole stream; a sending node sends paced commands until told to
// stop. It talks with the drill on stdin and stdout, one line each:
//
//	stdout: drillnode: ready account=A mode=M
//	        drillnode: epoch=E seq=S ns=T     the first message of epoch E, delivered at wall time T
//	        drillnode: report last=L digest=D lost=N dup=N sent=N acked=N senders=ACC/I:n,... self=ACC/I resends=N
//	        drillnode: stopped sent=N acked=N  (after "stop": every command sent is acked)
//	        drillnode: diverged err=...        (fast mode: ErrDiverged; exit status 3)
//	stdin:  report | stop
//
// It exits when stdin ends (the drill is gone) or when its node stops.
func drillNodeCommand() *cli.Command {
	return &cli.Command{
		Name:   "node",
		Usage:  "a drill's node process (started by seqd drill failover)",
		Hidden: true,
		Flags: append(transportFlags(false),
			strFlag("account", "", "account of a sending node; empty: read-only"),
			strFlag("node.mode", "safe", "safe | fast"),
			intFlag("rate", 1000, "commands per second"),
			intFlag("size", 64, "payload bytes per command"),
			replayerFlag(),
		),
		Action: runDrillNode,
	}
}

// exitDiverged is the exit status of a drill node stopped by ErrDiverged.
const exitDiverged = 3

type drillNode struct {
	n        *node.Node
	self     wire.Account
	instance uint8
	mu       sync.Mutex // guards the rest; held per message (a drill, not a hot path)
	// check counts, instead of stopping at, what a drill checks: seqs
	// and commands lost or repeated, and the digest.
	check *check.Stream
	epoch uint32
	sent  uint64
}

func newDrillNode(self wire.Account, instance uint8) *drillNode {
	return &drillNode{self: self, instance: instance, check: check.New(check.Config{Digest: true})}
}

func (d *drillNode) OnMessage(m *node.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.check.Observe(m).Fault == check.SeqRepeat {
		return
	}
	if m.Epoch > d.epoch {
		d.epoch = m.Epoch
		fmt.Printf("drillnode: epoch=%d seq=%d ns=%d\n", m.Epoch, m.Seq, time.Now().UnixNano())
	}
}

// acked is how many of its own commands the node delivered.
func (d *drillNode) acked() uint64 {
	if d.self == 0 {
		return 0
	}
	return d.check.Received(check.Sender{Account: d.self, Instance: d.instance})
}

func (d *drillNode) report() {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ss []string
	d.check.Senders(func(k check.Sender, n uint64) {
		ss = append(ss, fmt.Sprintf("%s/%d:%d", k.Account, k.Instance, n))
	})
	sort.Strings(ss)
	resends := uint64(0)
	if d.n != nil {
		resends = d.n.Stats().Resends
	}
	k := d.check
	fmt.Printf("drillnode: report last=%d digest=%016x lost=%d dup=%d sent=%d acked=%d senders=%s self=%s/%d resends=%d\n",
		k.Last, k.Digest, k.Lost, k.Dup, d.sent, d.acked(), orDash(strings.Join(ss, ",")), d.self, d.instance, resends)
}

func runDrillNode(cc *cli.Context) error {
	log := newLogger(cc)
	cfg := node.DefaultConfig()
	cfg.Rewind = true
	cfg.BlockWhenFull = true
	cfg.Replayers = cc.StringSlice("replayer")
	cfg.Account = cc.String("account")
	cfg.ReadOnly = cfg.Account == ""
	mode := cc.String("node.mode")
	if err := oneOf("node.mode", mode, "safe", "fast"); err != nil {
		return err
	}
	if mode == "fast" {
		cfg.Mode = node.Fast
	}
	if err := cfg.Validate(); err != nil {
		return configError(err, nodeKeys)
	}
	var self wire.Account
	if cfg.Account != "" {
		var err error
		if self, err = wire.ParseAccount(cfg.Account); err != nil {
			return keyError("account", fmt.Sprintf("%q", cfg.Account), "1..8 printable ASCII bytes")
		}
	}
	d := newDrillNode(self, cfg.Instance)
	client, err := openClient(cc, log, "node")
	if err != nil {
		return err
	}
	defer client.Close()
	if d.n, err = node.New(cfg, d, client); err != nil {
		return configError(err, nodeKeys)
	}
	ctx, cancel := context.WithCancel(cc.Context)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- d.n.Run(ctx) }()
	fmt.Printf("drillnode: ready account=%s mode=%s\n", orDash(cfg.Account), mode)

	stopSend := make(chan struct{})
	sendDone := make(chan struct{})
	if cfg.ReadOnly {
		close(sendDone)
	} else {
		go d.send(ctx, log, cc.Int("rate"), cc.Int("size"), stopSend, sendDone)
	}
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
	}()
	stopping := false
	for {
		select {
		case err := <-runErr:
			if errors.Is(err, node.ErrDiverged) {
				fmt.Printf("drillnode: diverged err=%q\n", err.Error())
				return &codedError{code: exitDiverged, err: err}
			}
			if err == nil {
				err = errors.New("node stopped")
			}
			return err
		case c, ok := <-cmds:
			if !ok {
				return nil // the drill is gone
			}
			switch c {
			case "report":
				d.report()
			case "stop":
				if !stopping {
					stopping = true
					close(stopSend)
					go d.waitAcked(ctx, sendDone)
				}
			}
		}
	}
}

// send sends paced commands (a burst every 10 ms) until stop.
func (d *drillNode) send(ctx context.Context, log interface{ Error(string, ...any) }, rate, size int, stop, done chan struct{}) {
	defer close(done)
	p := make([]byte, size)
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var i uint64
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := uint64(time.Since(t0).Seconds() * float64(rate))
		for ; i < due; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bench.FillPayload(p, i+1)
			if _, err := d.n.SendContext(ctx, p); err != nil {
				if ctx.Err() == nil {
					log.Error("send", "cmd", i+1, "err", err)
				}
				return
			}
			d.mu.Lock()
			d.sent++
			d.mu.Unlock()
		}
	}
}

// waitAcked prints the stopped line once every command sent is acked
// (the drill gives up on its own deadline).
func (d *drillNode) waitAcked(ctx context.Context, sendDone chan struct{}) {
	<-sendDone
	for ctx.Err() == nil {
		d.mu.Lock()
		sent, acked := d.sent, d.acked()
		d.mu.Unlock()
		if acked >= sent {
			fmt.Printf("drillnode: stopped sent=%d acked=%d\n", sent, acked)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
