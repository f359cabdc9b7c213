package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// HotNodeConfig is one process of the hot-hot drill: an instance of the
// stock account (a hot-hot pair member: an examples/inventory instance),
// the checker (Check: a read-only node), or the load (Front: the
// inventory front the drill's buyers call).
type HotNodeConfig struct {
	// Node configures the node; RunHotNode sets Rewind (from seq 1) and
	// ReadOnly for the checker; an instance takes its Replayers and
	// SilenceTimeout (inventory.StartInstance builds its node, HotHot,
	// rewinding from the flushed seq + 1).
	Node node.Config
	// DB is an instance's SQLite database file (created when missing; a
	// restarted instance loads it).
	DB string
	// Front, when set, makes this the load: an inventory front (a
	// gateway node of the account) serving its HTTP API on this address
	// (the drill's buyers POST /restock and /reserve to it).
	Front string
	// Load is the account whose commands are orders.
	Load string
	// Stock is the items the drill restocks first (the checker's bound).
	Stock int64
	// Check makes this the checker instead of an instance.
	Check bool
	// Stdin carries the drill's commands (report); Out receives the
	// node's lines. nil: os.Stdin, os.Stdout.
	Stdin io.Reader
	Out   io.Writer
	// Announce, if set, starts this process's gossip announcement; state
	// reports, from any goroutine, whether it is the active instance and
	// the last seq it applied. What it returns is closed at the end; if
	// it has a Refresh method (a tiered.Agent), that is called at each
	// activation change, so that gossip carries it at once rather than
	// at the next MetaInterval.
	Announce func(state func() (active bool, applied uint64)) (io.Closer, error)
}

// hotKey is the item the drill's load restocks and reserves.
const hotKey = "item"

// stockCheck is the drill's checker: it reads the stream from seq 1 and
// counts, for the pair's account, transactions of the load left without
// a reply or replied to twice, items sold beyond the stock or a reply
// showing a stock below zero, and commands of an instance that was not
// the active one when they entered the stream. It prints the first
// command of each newly activated instance (the switch's end).
type stockCheck struct {
	load, shop wire.Account
	stock      int64
	out        io.Writer
	mu         sync.Mutex // guards the rest and out
	last       uint64
	orders     map[uint64]bool // transaction seq -> replied
	resv       map[uint64]bool // the reservations among them
	dup, sold  uint64
	oversold   uint64 // replies with a stock below zero
	outside    uint64 // commands of an instance not active at that point
	active     int
	waitFirst  bool
	x          wire.Internal
	txn        inventory.TxnView
	reply      inventory.Reply
	fenced     uint64 // RejectNotActive records of the pair
}

func (k *stockCheck) OnMessage(m *node.Message) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.last = m.Seq
	switch {
	case m.Internal():
		if m.DecodeInternal(&k.x) != nil || k.x.Account != k.shop {
			return
		}
		switch k.x.Type {
		case wire.InternalNodeActivated:
			k.active, k.waitFirst = int(k.x.Instance), true
		case wire.InternalNodeDeactivated:
			if k.active == int(k.x.Instance) {
				k.active, k.waitFirst = -1, false
			}
		case wire.InternalRejected:
			if wire.RejectReason(k.x.Value) == wire.RejectNotActive {
				k.fenced++
			}
		}
	case m.Account == k.load:
		if inventory.DecodeTxn(m.Payload, &k.txn) != nil {
			return
		}
		k.orders[m.Seq] = false
		if k.txn.Len() > 0 && k.txn.Delta(0) < 0 {
			k.resv[m.Seq] = true
		}
	case m.Account == k.shop:
		if int(m.Instance) != k.active {
			k.outside++
		} else if k.waitFirst {
			k.waitFirst = false
			fmt.Fprintf(k.out, "hotcheck: first instance=%d seq=%d ns=%d\n", m.Instance, m.Seq, time.Now().UnixNano())
		}
		if inventory.DecodeReply(m.Payload, &k.reply) != nil {
			k.outside++ // not a reply
			return
		}
		answered, known := k.orders[k.reply.Seq]
		if !known {
			k.outside++ // a reply to no transaction
			return
		}
		if answered {
			k.dup++
			return
		}
		k.orders[k.reply.Seq] = true
		if k.reply.Stock < 0 {
			k.oversold++
		}
		if k.resv[k.reply.Seq] && k.reply.Outcome == inventory.OK {
			k.sold++
		}
	}
}

func (k *stockCheck) report() {
	k.mu.Lock()
	defer k.mu.Unlock()
	var unanswered uint64
	for _, a := range k.orders {
		if !a {
			unanswered++
		}
	}
	oversold := k.oversold
	if int64(k.sold) > k.stock {
		oversold += k.sold - uint64(k.stock)
	}
	fmt.Fprintf(k.out, "hotcheck: report last=%d orders=%d unanswered=%d dup=%d sold=%d oversold=%d outside=%d fenced=%d\n",
		k.last, len(k.orders), unanswered, k.dup, k.sold, oversold, k.outside, k.fenced)
}

// lockedWriter serialises the lines of several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, a ...any) {
	l.mu.Lock()
	fmt.Fprintf(l.w, format, a...)
	l.mu.Unlock()
}

// RunHotNode is `seqd drill hotnode`, a process of the hot-hot drill
// (hidden: the drill starts it from its own binary): an instance of the
// stock account (an examples/inventory instance on its SQLite database,
// hot-hot, sending its replies also while rewinding), the checker
// (Check, reading the stream from seq 1), or the load (Front: the
// buyers' inventory front). It talks
// with the drill on stdin and stdout, one line each:
//
//	stdout: hotnode: ready account=A instance=I [resume=S]  (an instance: its database's flushed seq)
//	        hotnode: live seq=S active=B      caught up with the live stream
//	        hotnode: active ns=T | passive ns=T  its activation changed (live only)
//	        hotnode: digest seq=S d=D         the service's checkpoints (every 100 seqs)
//	        hotcheck: first instance=I seq=S ns=T  the first command of a newly activated instance
//	        hotcheck: report last=L orders=N unanswered=N dup=N sold=N oversold=N outside=N fenced=N
//	stdin:  report (the checker)
//
// It exits when stdin ends (the drill is gone) or when its node stops.
func RunHotNode(ctx context.Context, cfg HotNodeConfig, client transport.Client) error {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	out := &lockedWriter{w: cfg.Out}
	load, err := wire.ParseAccount(cfg.Load)
	if err != nil {
		return fmt.Errorf("drill hotnode: load account %q: %w", cfg.Load, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ncfg := cfg.Node
	var (
		run   func(context.Context) error
		k     *stockCheck
		n     *node.Node
		state = func() (bool, uint64) { return false, 0 }
		inst  *inventory.Instance
	)
	switch {
	case cfg.Check:
		shop, err := wire.ParseAccount(ncfg.Account)
		if err != nil {
			return fmt.Errorf("drill hotnode: account %q: %w", ncfg.Account, err)
		}
		ncfg.Account, ncfg.ReadOnly, ncfg.Rewind = "", true, true
		k = &stockCheck{load: load, shop: shop, stock: cfg.Stock, orders: map[uint64]bool{}, resv: map[uint64]bool{}, active: -1, out: out.w}
		if n, err = node.New(ncfg, k, client); err != nil {
			return err
		}
		run = n.Run
	case cfg.Front != "":
		f, err := inventory.NewFront(ncfg.Account, 20*time.Second)
		if err != nil {
			return err
		}
		ncfg.BlockWhenFull = true
		if n, err = node.New(ncfg, f, client); err != nil {
			return err
		}
		f.Attach(n)
		l, err := net.Listen("tcp", cfg.Front)
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(l) }()
		defer hs.Close()
		run = n.Run
	default:
		if cfg.DB == "" {
			return errors.New("drill hotnode: an instance needs its database (--db)")
		}
		scfg := inventory.DefaultConfig()
		scfg.RepliesWhileRewinding, scfg.CheckpointEvery = true, 100
		inst, err = inventory.StartInstance(ctx, inventory.InstanceConfig{
			Account: ncfg.Account, Instance: ncfg.Instance, DB: "sqlite:" + cfg.DB, Service: scfg,
			Node: func(c *node.Config) {
				c.HotHot = true
				c.Replayers, c.SilenceTimeout = ncfg.Replayers, ncfg.SilenceTimeout
			},
		}, client)
		if err != nil {
			return err
		}
		n = inst.Node
		run = inst.Run
		state = func() (bool, uint64) { return inst.Node.Active(), inst.Service.Status().Applied }
	}
	refresh := func() {}
	if cfg.Announce != nil {
		closer, err := cfg.Announce(state)
		if err != nil {
			return err
		}
		defer closer.Close()
		if r, ok := closer.(interface{ Refresh() }); ok {
			refresh = r.Refresh // re-announce an activation change at once
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- run(ctx) }()
	if inst != nil {
		out.printf("hotnode: ready account=%s instance=%d resume=%d\n", ncfg.Account, ncfg.Instance, inst.Service.Resume())
		go watchInstance(ctx, inst, out, refresh)
	} else {
		out.printf("hotnode: ready account=%s instance=%d\n", orDash(cfg.Node.Account), ncfg.Instance)
	}
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(cfg.Stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
	}()
	for {
		select {
		case err := <-runErr:
			if err == nil && ctx.Err() == nil {
				err = errors.New("node stopped")
			}
			return err
		case c, ok := <-cmds:
			if !ok {
				cancel() // the drill is gone; an instance flushes and stops
				if err := <-runErr; !errors.Is(err, context.Canceled) {
					return err
				}
				return nil
			}
			if c == "report" && k != nil {
				k.report()
			}
		}
	}
}

// watchInstance prints an instance's lines: live once it caught up, its
// activation changes afterwards, and every checkpoint of its service;
// refresh re-announces the instance's gossip Meta on a change.
func watchInstance(ctx context.Context, in *inventory.Instance, out *lockedWriter, refresh func()) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	live, active := false, false
	var printed uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, c := range in.Service.Checkpoints() {
			if c.Seq > printed {
				printed = c.Seq
				out.printf("hotnode: digest seq=%d d=%016x\n", c.Seq, c.Digest)
			}
		}
		if !live {
			if in.Node.Rewinding() {
				continue
			}
			live, active = true, in.Node.Active()
			refresh()
			out.printf("hotnode: live seq=%d active=%v\n", in.Service.Status().Applied, active)
			continue
		}
		if a := in.Node.Active(); a != active {
			active = a
			refresh()
			word := "passive"
			if a {
				word = "active"
			}
			out.printf("hotnode: %s ns=%d\n", word, time.Now().UnixNano())
		}
	}
}
