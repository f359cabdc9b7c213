package sim

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// The hot-hot pair (Config.HotHot): two instances of account "pair" run
// a stock handler that answers every command of the senders (an order)
// with one command of its own, numbered from the stream. The active one
// is killed (restarted later, rewinding from seq 1), paused past the
// active-timeout or cut off now and then, while the senders' load and
// the sequencer group's faults go on. After every step the stream is
// checked: the pair's commands are exactly its handler's sends (one per
// order, id = the order's seq << 16), each once, each from the instance
// active at that point; at the end every order is answered and the
// instances' digests agree at every seq both applied.

const (
	pairAccountName = "pair"
	pairStock       = 5000
	// pairActiveTimeout is the sequencer's ActiveTimeout in a run with a
	// pair; the instances heartbeat every pairHeartbeat.
	pairActiveTimeout = 5 * time.Millisecond
	pairHeartbeat     = time.Millisecond
	pairDigestEvery   = 64
)

var pairAccount = wire.MustAccount(pairAccountName)

type pairNode struct {
	w           *world
	inst        uint8
	client      transport.Client
	peer        transport.Peer
	rclient     transport.Client
	core        *node.Core
	incarnation uint64
	onFrame     transport.Handler
	onRepair    transport.Handler
	// The stock handler's state, rebuilt from the stream by every
	// incarnation.
	left   int64
	digest uint64
	buf    []byte
	// digests are the handler's digests every pairDigestEvery seqs, kept
	// across incarnations: a restart must compute the same ones.
	digests map[uint64]uint64
	// Faults: dead (killed, restarts at downUntil), paused (no step, no
	// tick until pausedUntil), cut (partitioned until healAt).
	dead        bool
	downUntil   int64
	pausedUntil int64
	cut         bool
	healAt      int64
}

type simPair struct {
	w     *world
	nodes [2]*pairNode
	// The checker's position in w.log and what it learnt so far (rebuilt
	// from scratch when an epoch change cut the log below it), and how
	// many of w.cuts it has seen.
	checked  int
	cuts     int
	active   int // instance active at that point of the log; -1: none
	answered map[uint64]bool
	// open counts the orders in answered not answered yet (done asks
	// after every step; a walk of the map was most of a run's time).
	open int
	// compared counts the digests compared with the partner's at the
	// same seq (compare checks each as it is taken).
	compared int
	// Faults done, for Result.
	kills, pauses, partitions int
}

func newSimPair(w *world) (*simPair, error) {
	p := &simPair{w: w, active: -1, answered: map[uint64]bool{}}
	for i := range p.nodes {
		n := &pairNode{w: w, inst: uint8(i + 1), incarnation: 1, digests: map[uint64]uint64{}}
		n.client = w.net.Client()
		n.peer = n.client.(interface{ Peer() transport.Peer }).Peer()
		n.onFrame = n.frame
		if w.rep != nil {
			n.rclient = w.rep.net.Client()
			n.onRepair = n.repairFrame
		}
		if err := n.start(); err != nil {
			return nil, err
		}
		p.nodes[i] = n
	}
	return p, nil
}

// start builds the instance's core: at the run's start or after a kill
// (a new incarnation rebuilding its state from seq 1).
func (n *pairNode) start() error {
	w := n.w
	cfg := node.DefaultConfig()
	cfg.Account, cfg.Instance, cfg.HotHot = pairAccountName, n.inst, true
	cfg.Incarnation = n.incarnation
	cfg.Session = 1
	cfg.Rewind = true
	cfg.Seed = w.cfg.Seed*977 + uint64(n.inst) + n.incarnation<<20
	cfg.Window = 64
	cfg.ResendInterval = 5 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	cfg.HotHotHeartbeat = pairHeartbeat
	if w.rep != nil {
		cfg.Replayers = []string{"replayer"}
	}
	core, err := node.NewCore(cfg, n, n)
	if err != nil {
		return err
	}
	n.core, n.left, n.digest = core, pairStock, 0
	return nil
}

// Send is the core's output.
func (n *pairNode) Send(frame []byte) { _ = n.client.Send(frame) }

// SendTo reaches the replayer (node.SourceOutput).
func (n *pairNode) SendTo(src receiver.Source, frame []byte) {
	if n.rclient != nil && src == 1 {
		_ = n.rclient.Send(frame)
	}
}

func (n *pairNode) frame(frame []byte, _ transport.Peer) {
	if err := n.core.Step(n.w.now, frame); err != nil {
		n.w.fail("pair/%d rejected a frame: %v", n.inst, err)
	}
}

func (n *pairNode) repairFrame(frame []byte, _ transport.Peer) {
	if err := n.core.StepFrom(n.w.now, frame, 1); err != nil {
		n.w.fail("pair/%d rejected a replayer frame: %v", n.inst, err)
	}
}

// OnMessage is the stock handler: every order takes an item while any is
// left, and is answered once.
func (n *pairNode) OnMessage(m *node.Message) {
	if !m.Internal() && m.Account != pairAccount {
		sold := n.left > 0
		if sold {
			n.left--
		}
		n.digest = mixDigest(n.digest, m.Seq, sold)
		word := "out "
		if sold {
			word = "sold "
		}
		n.buf = strconv.AppendUint(append(n.buf[:0], word...), m.Seq, 10)
		if _, err := n.core.Send(n.w.now, n.buf); err != nil {
			n.w.fail("pair/%d: send for order %d: %v", n.inst, m.Seq, err)
		}
	}
	if m.Seq%pairDigestEvery == 0 {
		if d, ok := n.digests[m.Seq]; ok && d != n.digest {
			n.w.fail("pair/%d: incarnation %d's digest at seq %d differs from an earlier one's", n.inst, n.incarnation, m.Seq)
		}
		n.digests[m.Seq] = n.digest
		if p := n.w.pair; p != nil {
			p.compare(n, m.Seq)
		}
	}
}

func mixDigest(d, seq uint64, sold bool) uint64 {
	d = (d ^ seq) * 1099511628211
	if sold {
		d = (d ^ 1) * 1099511628211
	}
	return d
}

// up reports whether the instance runs (neither dead nor paused).
func (n *pairNode) up() bool { return !n.dead && n.w.now >= n.pausedUntil }

// faults kills, pauses or cuts off the active instance now and then (one
// fault at a time), and ends the faults that are over.
func (p *simPair) faults() {
	w := p.w
	for _, n := range p.nodes {
		if n.dead && w.now >= n.downUntil {
			// A new process: new sockets (frames sent to the old ones,
			// unicast repairs included, are not its own), a new
			// incarnation rebuilding its state from seq 1.
			n.dead = false
			n.incarnation++
			_ = n.client.Close()
			n.client = w.net.Client()
			n.peer = n.client.(interface{ Peer() transport.Peer }).Peer()
			if w.rep != nil {
				_ = n.rclient.Close()
				n.rclient = w.rep.net.Client()
			}
			if err := n.start(); err != nil {
				w.fail("pair/%d restart: %v", n.inst, err)
			}
		}
		if n.cut && w.now >= n.healAt {
			n.cut = false
			w.net.Partition(n.peer, false)
		}
	}
	for _, n := range p.nodes {
		if n.dead || n.cut || w.now < n.pausedUntil {
			return // one fault at a time
		}
	}
	if w.now < w.idleUntil || w.rng.IntN(5000) != 0 {
		return
	}
	var a *pairNode
	for _, n := range p.nodes {
		if n.core.Active() {
			a = n
		}
	}
	if a == nil {
		return
	}
	switch w.rng.IntN(3) {
	case 0: // SIGKILL: what it had in flight dies with it
		a.dead = true
		a.downUntil = w.now + int64(time.Millisecond)*int64(1+w.rng.IntN(20))
		p.kills++
	case 1: // SIGSTOP for 2-4 active-timeouts, then SIGCONT
		a.pausedUntil = w.now + int64(pairActiveTimeout)*int64(2+w.rng.IntN(3))
		p.pauses++
	default:
		a.cut = true
		a.healAt = w.now + int64(pairActiveTimeout)*int64(1+w.rng.IntN(4))
		w.net.Partition(a.peer, true)
		p.partitions++
	}
}

func (p *simPair) receive() {
	for _, n := range p.nodes {
		if !n.up() {
			continue
		}
		if _, err := n.client.Poll(n.onFrame, 0); err != nil {
			p.w.fail("pair/%d poll: %v", n.inst, err)
		}
		if n.rclient != nil {
			if _, err := n.rclient.Poll(n.onRepair, 0); err != nil {
				p.w.fail("pair/%d poll (replayer): %v", n.inst, err)
			}
		}
		n.core.Tick(p.w.now)
		n.core.Flush(p.w.now)
		if err := n.core.Err(); err != nil {
			p.w.fail("pair/%d stopped: %v", n.inst, err)
		}
	}
}

// check reads the stream the sequencer published since the last step and
// fails on a command of the pair that is not exactly one of its
// handler's sends (one per order, id = order seq << 16), or that came
// twice, or from an instance not active at that point.
func (p *simPair) check() {
	w := p.w
	// An epoch change that cut what was checked: read the log again from
	// the start. The log may have grown back past the checked position
	// in the same step (the new primary published before this check), so
	// the cut is read from w.cuts, not guessed from the log's length: a
	// command the cut lost is sequenced again in the new epoch, once.
	for ; p.cuts < len(w.cuts); p.cuts++ {
		if w.cuts[p.cuts].last < uint64(p.checked) {
			p.checked, p.active, p.open = 0, -1, 0
			clear(p.answered)
		}
	}
	for ; p.checked < len(w.log); p.checked++ {
		seq := uint64(p.checked + 1)
		e := &w.log[p.checked]
		switch {
		case e.flags&wire.FlagInternal != 0:
			x := &e.internal
			if x.Account != pairAccount {
				continue
			}
			if x.Type == wire.InternalNodeActivated {
				p.active = int(x.Instance)
			} else if x.Type == wire.InternalNodeDeactivated && p.active == int(x.Instance) {
				p.active = -1
			}
		case e.account != pairAccount:
			p.answered[seq] = false // an order
			p.open++
		default:
			order, idx := e.cmdSeq>>16, e.cmdSeq&0xffff
			answered, isOrder := p.answered[order]
			switch {
			case int(e.instance) != p.active:
				w.fail("seq %d: pair/%d's command entered the stream while the active instance is %d", seq, e.instance, p.active)
			case idx != 0 || !isOrder:
				w.fail("seq %d: pair command id %d is not a send of its handler (no order at seq %d, or not its only send)", seq, e.cmdSeq, order)
			case answered:
				w.fail("seq %d: order %d answered twice", seq, order)
			}
			if isOrder && !answered {
				p.open--
			}
			p.answered[order] = true
		}
	}
}

// compare checks the digest instance n just kept at seq against its
// partner's at that seq, if the partner kept one.
func (p *simPair) compare(n *pairNode, seq uint64) {
	o := p.nodes[0]
	if o == n {
		o = p.nodes[1]
	}
	if o == nil {
		return // the second instance is not built yet
	}
	d, ok := o.digests[seq]
	if !ok {
		return
	}
	if d != n.digests[seq] {
		p.w.fail("the pair's instances diverged at seq %d", seq)
	}
	p.compared++
}

// done reports whether every order in the stream is answered and both
// instances run, caught up, with nothing left to send, and that their
// digests were compared at some seq (compare checks each as it comes).
func (p *simPair) done() bool {
	last := uint64(len(p.w.log))
	for _, n := range p.nodes {
		if !n.up() || n.cut || n.core.Delivered() < last || n.core.InFlight() > 0 || n.core.Backlog() > 0 {
			return false
		}
	}
	if p.open > 0 {
		return false
	}
	if p.compared == 0 && last >= pairDigestEvery {
		p.w.fail("no seq at which both pair instances kept a digest")
		return false
	}
	return true
}

func (p *simPair) progress() string {
	s := fmt.Sprintf("pair{active=%d orders=%d unanswered=%d", p.active, len(p.answered), p.open)
	if p.open > 0 {
		var open []uint64
		for seq, a := range p.answered {
			if !a && len(open) < 10 {
				open = append(open, seq)
			}
		}
		slices.Sort(open)
		s += fmt.Sprintf(" open=%v", open)
	}
	for _, n := range p.nodes {
		st := n.core.Stats()
		s += fmt.Sprintf(" %d:{active=%v delivered=%d stable=%d inflight=%d backlog=%d dead=%v paused=%v cut=%v naks=%d gaps=%d src=%d err=%v}", n.inst, n.core.Active(), n.core.Delivered(), n.core.Stable(), n.core.InFlight(), n.core.Backlog(), n.dead, n.w.now < n.pausedUntil, n.cut, st.NaksSent, st.Gaps, st.SourceSwitches, n.core.Err())
		if debug {
			s += fmt.Sprintf("%+v", st.Stats)
		}
	}
	return s + "}"
}
