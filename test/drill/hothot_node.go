package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// HotNodeConfig is one process of the hot-hot drill: an instance of the
// stock account (a hot-hot pair member), or the checker (Check: a
// read-only node).
type HotNodeConfig struct {
	// Node configures the node; RunHotNode sets Rewind (from seq 1),
	// HotHot for an instance and ReadOnly for the checker.
	Node node.Config
	// Load is the account whose commands are orders.
	Load string
	// Stock is the items the stock handler starts with.
	Stock int64
	// Check makes this the checker instead of an instance.
	Check bool
	// Stdin carries the drill's commands (report); Out receives the
	// node's lines. nil: os.Stdin, os.Stdout.
	Stdin io.Reader
	Out   io.Writer
	// Announce, if set, starts this process's gossip announcement; state
	// reports, from any goroutine, whether it is the active instance and
	// the last seq it applied. What it returns is closed at the end.
	Announce func(state func() (active bool, applied uint64)) (io.Closer, error)
}

// stockNode is the drill's hot-hot handler: every order (a command of
// the load account) takes one item while any is left and is answered
// "sold SEQ" or "out SEQ", SEQ the order's seq. Its digest covers every
// order applied, in order; it prints it every digestEvery seqs so that
// the drill compares the instances at the seqs both applied.
type stockNode struct {
	n      *node.Node
	load   wire.Account
	self   wire.Account
	inst   uint8
	left   int64
	digest uint64
	buf    []byte
	live   bool
	// waitFirst: activated, its first own command not yet delivered.
	waitFirst bool
	sendErrs  uint64
	applied   atomic.Uint64 // last seq applied, for the gossip announcement
	mu        sync.Mutex    // guards out
	out       io.Writer
}

const digestEvery = 100

func (s *stockNode) printf(format string, a ...any) {
	s.mu.Lock()
	fmt.Fprintf(s.out, format, a...)
	s.mu.Unlock()
}

func (s *stockNode) OnMessage(m *node.Message) {
	s.applied.Store(m.Seq)
	if !s.live && !s.n.Rewinding() {
		s.live = true
		s.printf("hotnode: live seq=%d active=%v\n", m.Seq, s.n.Active())
	}
	if !m.Internal() && m.Account == s.load {
		sold := s.left > 0
		word := "out "
		if sold {
			s.left--
			word = "sold "
		}
		s.digest = mixDigest(s.digest, m.Seq, sold)
		s.buf = strconv.AppendUint(append(s.buf[:0], word...), m.Seq, 10)
		if _, err := s.n.TrySend(s.buf); err != nil {
			s.sendErrs++
			s.printf("hotnode: send error seq=%d err=%q\n", m.Seq, err.Error())
		}
	}
	if s.waitFirst && !m.Internal() && m.Account == s.self && m.Instance == s.inst {
		s.waitFirst = false
		s.printf("hotnode: first seq=%d ns=%d\n", m.Seq, time.Now().UnixNano())
	}
	if m.Seq%digestEvery == 0 {
		s.printf("hotnode: digest seq=%d d=%016x left=%d\n", m.Seq, s.digest, s.left)
	}
}

// mixDigest folds one applied order into d (FNV-1a over its seq and
// outcome): equal on two instances that applied the same orders alike.
func mixDigest(d, seq uint64, sold bool) uint64 {
	if d == 0 {
		d = 14695981039346656037
	}
	for i := 0; i < 8; i++ {
		d = (d ^ (seq >> (8 * i) & 0xff)) * 1099511628211
	}
	if sold {
		d = (d ^ 1) * 1099511628211
	}
	return d
}

func (s *stockNode) OnActivated() {
	if s.n.Rewinding() {
		return // history: this instance was active once
	}
	s.waitFirst = true
	s.printf("hotnode: active ns=%d\n", time.Now().UnixNano())
}

func (s *stockNode) OnDeactivated() {
	if s.n.Rewinding() {
		return
	}
	s.waitFirst = false
	s.printf("hotnode: passive ns=%d\n", time.Now().UnixNano())
}

// stockCheck is the drill's checker: it reads the stream from seq 1 and
// counts, for the pair's account, orders left unanswered or answered
// twice, items sold beyond the stock, and commands of an instance that
// was not the active one when they entered the stream.
type stockCheck struct {
	load, shop wire.Account
	stock      int64
	mu         sync.Mutex
	last       uint64
	orders     map[uint64]bool // order seq -> answered
	dup, sold  uint64
	outside    uint64 // answers of an instance not active at that point
	active     int
	x          wire.Internal
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
			k.active = int(k.x.Instance)
		case wire.InternalNodeDeactivated:
			if k.active == int(k.x.Instance) {
				k.active = -1
			}
		case wire.InternalRejected:
			if wire.RejectReason(k.x.Value) == wire.RejectNotActive {
				k.fenced++
			}
		}
	case m.Account == k.load:
		k.orders[m.Seq] = false
	case m.Account == k.shop:
		if int(m.Instance) != k.active {
			k.outside++
		}
		word, seqText, _ := strings.Cut(string(m.Payload), " ")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		answered, known := k.orders[seq]
		if err != nil || !known {
			k.outside++ // an answer to no order
			return
		}
		if answered {
			k.dup++
			return
		}
		k.orders[seq] = true
		if word == "sold" {
			k.sold++
		}
	}
}

func (k *stockCheck) report(out io.Writer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var unanswered uint64
	for _, a := range k.orders {
		if !a {
			unanswered++
		}
	}
	oversold := uint64(0)
	if int64(k.sold) > k.stock {
		oversold = k.sold - uint64(k.stock)
	}
	fmt.Fprintf(out, "hotcheck: report last=%d orders=%d unanswered=%d dup=%d sold=%d oversold=%d outside=%d fenced=%d\n",
		k.last, len(k.orders), unanswered, k.dup, k.sold, oversold, k.outside, k.fenced)
}

// RunHotNode is `seqd drill hotnode`, a process of the hot-hot drill
// (hidden: the drill starts it from its own binary): an instance of the
// stock account, or with Check the checker. It reads the stream from
// seq 1 and talks with the drill on stdin and stdout, one line each:
//
//	stdout: hotnode: ready account=A instance=I
//	        hotnode: live seq=S active=B      caught up with the live stream
//	        hotnode: active ns=T | passive ns=T  its activation changed (live only)
//	        hotnode: first seq=S ns=T        its first command in the stream since it was activated
//	        hotnode: digest seq=S d=D left=N   every 100 seqs
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
	load, err := wire.ParseAccount(cfg.Load)
	if err != nil {
		return fmt.Errorf("drill hotnode: load account %q: %w", cfg.Load, err)
	}
	ncfg := cfg.Node
	ncfg.Rewind = true
	var h node.Handler
	var k *stockCheck
	var s *stockNode
	if cfg.Check {
		shop, err := wire.ParseAccount(ncfg.Account)
		if err != nil {
			return fmt.Errorf("drill hotnode: account %q: %w", ncfg.Account, err)
		}
		ncfg.Account, ncfg.ReadOnly = "", true
		k = &stockCheck{load: load, shop: shop, stock: cfg.Stock, orders: map[uint64]bool{}, active: -1}
		h = k
	} else {
		ncfg.HotHot = true
		s = &stockNode{load: load, self: wire.MustAccount(ncfg.Account), inst: ncfg.Instance, left: cfg.Stock, out: cfg.Out}
		h = s
	}
	n, err := node.New(ncfg, h, client)
	if err != nil {
		return err
	}
	if s != nil {
		s.n = n
	}
	if cfg.Announce != nil {
		state := func() (bool, uint64) { return false, 0 }
		if s != nil {
			state = func() (bool, uint64) { return n.Active(), s.applied.Load() }
		}
		closer, err := cfg.Announce(state)
		if err != nil {
			return err
		}
		defer closer.Close()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	fmt.Fprintf(cfg.Out, "hotnode: ready account=%s instance=%d\n", orDash(cfg.Node.Account), ncfg.Instance)
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
			if err == nil {
				err = errors.New("node stopped")
			}
			return err
		case c, ok := <-cmds:
			if !ok {
				return nil
			}
			if c == "report" && k != nil {
				k.report(cfg.Out)
			}
		}
	}
}
