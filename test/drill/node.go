package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// ExitDiverged is the exit status of a drill node stopped by ErrDiverged.
const ExitDiverged = 3

// NodeConfig is one drill node.
type NodeConfig struct {
	// Node configures the node; the drill node rewinds from seq 1 and
	// blocks when its window is full (RunNode sets both); an empty
	// Account is a read-only node.
	Node node.Config
	// RatePerSecond and PayloadBytes shape a sending node's commands.
	RatePerSecond, PayloadBytes int
	// Mode is printed on the ready line ("safe" or "fast", as Node.Mode).
	Mode string
	// Stdin carries the drill's commands (report, stop); Out receives the
	// node's lines. nil: os.Stdin, os.Stdout.
	Stdin io.Reader
	Out   io.Writer
	Log   *slog.Logger
}

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
	out   io.Writer
}

func newDrillNode(self wire.Account, instance uint8) *drillNode {
	return &drillNode{self: self, instance: instance, check: check.New(check.Config{Digest: true}), out: os.Stdout}
}

func (d *drillNode) OnMessage(m *node.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.check.Observe(m).Fault == check.SeqRepeat {
		return
	}
	if m.Epoch > d.epoch {
		d.epoch = m.Epoch
		d.printf("drillnode: epoch=%d seq=%d ns=%d\n", m.Epoch, m.Seq, time.Now().UnixNano())
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
	d.printf("drillnode: report last=%d digest=%016x lost=%d dup=%d sent=%d acked=%d senders=%s self=%s/%d resends=%d\n",
		k.Last, k.Digest, k.Lost, k.Dup, d.sent, d.acked(), orDash(strings.Join(ss, ",")), d.self, d.instance, resends)
}

// The node's lines go to out (os.Stdout by default): one Printf per line.
func (d *drillNode) printf(format string, a ...any) { fmt.Fprintf(d.out, format, a...) }

// RunNode is `seqd drill node`, the node process of a failover drill (hidden: the
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
func RunNode(ctx context.Context, cfg NodeConfig, client transport.Client) error {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	ncfg := cfg.Node
	ncfg.Rewind = true
	ncfg.BlockWhenFull = true
	var self wire.Account
	if ncfg.Account != "" {
		var err error
		if self, err = wire.ParseAccount(ncfg.Account); err != nil {
			return err
		}
	}
	d := newDrillNode(self, ncfg.Instance)
	d.out = cfg.Out
	var err error
	if d.n, err = node.New(ncfg, d, client); err != nil {
		return err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := cfg.Mode
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- d.n.Run(ctx) }()
	d.printf("drillnode: ready account=%s mode=%s\n", orDash(ncfg.Account), mode)

	stopSend := make(chan struct{})
	sendDone := make(chan struct{})
	if ncfg.ReadOnly {
		close(sendDone)
	} else {
		go d.send(ctx, log, cfg.RatePerSecond, cfg.PayloadBytes, stopSend, sendDone)
	}
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(cfg.Stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
	}()
	stopping := false
	for {
		select {
		case err := <-runErr:
			if errors.Is(err, node.ErrDiverged) {
				d.printf("drillnode: diverged err=%q\n", err.Error())
				return err // the caller exits with ExitDiverged
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
			check.FillPayload(p, i+1)
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
			d.printf("drillnode: stopped sent=%d acked=%d\n", sent, acked)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
