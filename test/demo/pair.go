package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// The demo's hot-hot pair: two instances of account pairName react to
// every 100th command of the node triggerName with one command each
// ("pair reacts to seq S"); only the active one's reach the stream.
const (
	pairName    = "PAIR"
	triggerName = "DEMO0"
	pairPrefix  = "pair reacts to seq "
)

var pairAccount, triggerAccount = wire.MustAccount(pairName), wire.MustAccount(triggerName)

// pairTrigger says whether the pair reacts to m (each instance and each
// checker decides alike, from the stream).
func pairTrigger(m *node.Message) bool {
	return !m.Internal() && m.Account == triggerAccount && m.CmdSeq%100 == 0
}

// pairInstance is one instance of the pair: a hot-hot node in this
// process whose sends all come from its OnMessage (docs/node.md).
type pairInstance struct {
	inst    uint8
	n       *node.Node
	cancel  context.CancelFunc
	done    chan error
	closeCl func() error
	sendErr atomic.Pointer[error]
	buf     []byte
}

func (p *pairInstance) OnMessage(m *node.Message) {
	if !pairTrigger(m) {
		return
	}
	p.buf = strconv.AppendUint(append(p.buf[:0], pairPrefix...), m.Seq, 10)
	if _, err := p.n.TrySend(p.buf); err != nil && p.sendErr.Load() == nil {
		p.sendErr.Store(&err)
	}
}

// startPairInstance starts instance inst of the pair on the demo's groups,
// reading the stream from seq 1 (repairs from the replayer at nak).
func startPairInstance(ctx context.Context, inst uint8, mc multicast.Config, nak string) (*pairInstance, error) {
	p := &pairInstance{inst: inst, done: make(chan error, 1)}
	cfg := node.DefaultConfig()
	cfg.Account, cfg.Instance, cfg.HotHot = pairName, inst, true
	cfg.Rewind = true
	cfg.Replayers = []string{nak}
	mcc := mc
	mcc.FaultStream = 400 + uint64(inst)
	cl, err := multicast.NewClient(mcc)
	if err != nil {
		return nil, err
	}
	if p.n, err = node.New(cfg, p, cl); err != nil {
		cl.Close()
		return nil, err
	}
	p.closeCl = cl.Close
	ctx, p.cancel = context.WithCancel(ctx)
	go func() { p.done <- p.n.Run(ctx) }()
	return p, nil
}

// stop ends the instance as a crash would for its partner: it sends
// nothing more, heartbeats included.
func (p *pairInstance) stop() error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	p.cancel = nil
	err := <-p.done
	p.closeCl()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// pairCheck follows the pair in a node's stream: the trigger messages,
// the pair's commands and which instance sent each.
type pairCheck struct {
	triggers map[uint64]bool // seqs the pair must react to
	answered map[uint64]int  // trigger seq -> the pair's commands naming it
	cmds     uint64
	stray    uint64  // commands naming no trigger (or unreadable)
	runs     []uint8 // the instances of the runs of consecutive commands
	mu       sync.Mutex
}

func (k *pairCheck) observe(m *node.Message) {
	switch {
	case pairTrigger(m):
		k.mu.Lock()
		if k.triggers == nil {
			k.triggers, k.answered = map[uint64]bool{}, map[uint64]int{}
		}
		k.triggers[m.Seq] = true
		k.mu.Unlock()
	case !m.Internal() && m.Account == pairAccount:
		k.mu.Lock()
		defer k.mu.Unlock()
		k.cmds++
		if len(k.runs) == 0 || k.runs[len(k.runs)-1] != m.Instance {
			k.runs = append(k.runs, m.Instance)
		}
		s, ok := strings.CutPrefix(string(m.Payload), pairPrefix)
		seq, err := strconv.ParseUint(s, 10, 64)
		if !ok || err != nil || !k.triggers[seq] {
			k.stray++
			return
		}
		k.answered[seq]++
	}
}

// result is (triggers, commands, lost, dup, stray, runs).
func (k *pairCheck) result() (triggers, cmds, lost, dup, stray uint64, runs []uint8) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for s := range k.triggers {
		switch n := k.answered[s]; {
		case n == 0:
			lost++
		case n > 1:
			dup += uint64(n - 1)
		}
	}
	return uint64(len(k.triggers)), k.cmds, lost, dup, k.stray, append([]uint8(nil), k.runs...)
}

// pairActiveTimeout is the demo sequencers' sequencer.active-timeout (the
// `seqd sequencer` default).
const pairActiveTimeout = 250 * time.Millisecond

// stopActive stops the pair's active instance and waits for the other
// to become active, returning both and how long that took.
func stopActive(pair [2]*pairInstance) (stopped, took *pairInstance, ms float64, err error) {
	until := time.Now().Add(10 * time.Second)
	for stopped == nil {
		for i, in := range pair {
			if in.n.Active() {
				stopped, took = in, pair[1-i]
			}
		}
		if stopped == nil {
			if time.Now().After(until) {
				return nil, nil, 0, errors.New("demo: no active instance of the pair")
			}
			time.Sleep(time.Millisecond)
		}
	}
	t0 := time.Now()
	if err := stopped.stop(); err != nil {
		return nil, nil, 0, fmt.Errorf("demo: pair instance %d: %w", stopped.inst, err)
	}
	for !took.n.Active() {
		if time.Since(t0) > 10*time.Second {
			return nil, nil, 0, fmt.Errorf("demo: pair instance %d not active 10s after its partner stopped", took.inst)
		}
		time.Sleep(time.Millisecond)
	}
	return stopped, took, float64(time.Since(t0).Microseconds()) / 1000, nil
}
