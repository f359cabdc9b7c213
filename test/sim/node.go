package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// simNode is one node core plus what the checker knows about it.
type simNode struct {
	w        *world
	name     string
	account  wire.Account
	instance uint8
	readOnly bool
	client   transport.Client
	peer     transport.Peer
	core     *node.Core

	target    int    // commands to send
	sent      uint64 // commands issued (cmdSeq of the last one)
	delivered uint64 // last seq seen by OnMessage
	lastCmd   map[senderKey]uint64
	buf       []byte

	onFrame transport.Handler
}

type senderKey struct {
	account  wire.Account
	instance uint8
}

func newSimNode(w *world, i int, readOnly bool) (*simNode, error) {
	n := &simNode{
		w:        w,
		name:     fmt.Sprintf("n%d", i),
		instance: 1,
		readOnly: readOnly,
		lastCmd:  map[senderKey]uint64{},
	}
	if !readOnly {
		n.target = w.cfg.Commands / w.cfg.Senders
		if i == 0 {
			n.target += w.cfg.Commands % w.cfg.Senders
		}
	}
	n.account = wire.MustAccount(n.name)
	n.client = w.net.Client()
	n.peer = transport.Peer(i + 1) // mem numbers clients from 1 in creation order
	n.onFrame = n.frame
	cfg := node.DefaultConfig()
	cfg.Account = n.name
	cfg.Instance = n.instance
	cfg.Incarnation = 1
	cfg.Session = 1
	cfg.ReadOnly = readOnly
	// Every node checks the stream from seq 1: it rewinds from what the
	// sequencer's ring holds (the ring holds the whole run).
	cfg.Rewind = true
	cfg.Seed = w.cfg.Seed*131 + uint64(i)
	cfg.Window = 64 + 64*(i%3)
	cfg.ResendInterval = 5 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	if i%2 == 1 {
		cfg.Mode = node.Fast
	}
	core, err := node.NewCore(cfg, n, n)
	if err != nil {
		return nil, err
	}
	n.core = core
	return n, nil
}

// Send is the node core's output: every frame goes through the checker.
func (n *simNode) Send(frame []byte) {
	if n.readOnly {
		if k, err := wire.PeekKind(frame); err == nil && k == wire.KindCommand {
			n.w.fail("read-only node %s sent a command frame", n.name)
		}
	}
	_ = n.client.Send(frame)
}

func (n *simNode) frame(frame []byte, _ transport.Peer) {
	// The network carries only frames the sequencer built: a node that
	// rejects one has a bug (or the sequencer does).
	if err := n.core.Step(n.w.now, frame); err != nil {
		n.w.fail("%s rejected a frame: %v", n.name, err)
	}
}

// work issues commands while the window has room.
func (n *simNode) work() {
	if n.readOnly {
		return
	}
	w := n.w
	burst := 1 + w.rng.IntN(8)
	for i := 0; i < burst && n.sent < uint64(n.target); i++ {
		cmd := n.sent + 1
		size := payloadSize(w.cfg, n.account, cmd)
		n.buf = fillPayload(n.buf[:0], n.account, n.instance, cmd, size)
		got, err := n.core.Send(w.now, n.buf)
		if errors.Is(err, node.ErrWindowFull) {
			break
		}
		if err != nil {
			w.fail("%s Send: %v", n.name, err)
			return
		}
		if got != cmd {
			w.fail("%s Send returned cmdSeq %d, want %d", n.name, got, cmd)
		}
		n.sent = cmd
	}
	n.core.Flush(w.now)
}

func (n *simNode) receive() {
	if _, err := n.client.Poll(n.onFrame, 0); err != nil {
		n.w.fail("%s poll: %v", n.name, err)
	}
	n.core.Tick(n.w.now)
	if err := n.core.Err(); err != nil {
		n.w.fail("%s stopped: %v", n.name, err)
	}
}

// OnMessage checks every delivery against the sequencer's truth.
func (n *simNode) OnMessage(m *node.Message) {
	w := n.w
	if m.Seq != n.delivered+1 {
		w.fail("%s delivered seq %d after %d (gap or repeat)", n.name, m.Seq, n.delivered)
		return
	}
	n.delivered = m.Seq
	if m.Seq > uint64(len(w.log)) {
		w.fail("%s delivered seq %d the sequencer never published", n.name, m.Seq)
		return
	}
	e := w.log[m.Seq-1]
	if e.account != m.Account || e.instance != m.Instance || e.cmdSeq != m.CmdSeq || e.time != m.Time {
		w.fail("%s seq %d differs from the sequencer's: got %v/%d cmd %d t=%d, want %v/%d cmd %d t=%d",
			n.name, m.Seq, m.Account, m.Instance, m.CmdSeq, m.Time, e.account, e.instance, e.cmdSeq, e.time)
		return
	}
	if m.Mine() != (m.Account == n.account) {
		w.fail("%s Mine()=%v for account %v", n.name, m.Mine(), m.Account)
	}
	if m.Internal() {
		return
	}
	k := senderKey{m.Account, m.Instance}
	if last := n.lastCmd[k]; m.CmdSeq != last+1 {
		w.fail("%s got command %d of %v after %d: not exactly once", n.name, m.CmdSeq, m.Account, last)
		return
	}
	n.lastCmd[k] = m.CmdSeq
	size := payloadSize(w.cfg, m.Account, m.CmdSeq)
	if !checkPayload(m.Payload, m.Account, m.Instance, m.CmdSeq, size) {
		w.fail("%s seq %d: payload of %v cmd %d corrupt (len %d, want %d)", n.name, m.Seq, m.Account, m.CmdSeq, len(m.Payload), size)
	}
}

// finalCheck: every command of every sender was delivered exactly once.
func (n *simNode) finalCheck() error {
	for _, s := range n.w.nodes {
		if s.readOnly {
			continue
		}
		if got := n.lastCmd[senderKey{s.account, s.instance}]; got != s.sent {
			return fmt.Errorf("%w: %s delivered %d commands of %s, which sent %d", ErrInvariant, n.name, got, s.name, s.sent)
		}
	}
	return nil
}

// payloadSize is a deterministic function of the command's identity so
// that every receiver can check a payload without seeing the send.
func payloadSize(cfg Config, a wire.Account, cmd uint64) int {
	h := mix(uint64(a) ^ cmd*0x9e3779b97f4a7c15 ^ cfg.Seed)
	if cfg.LargeEvery > 0 && h%uint64(cfg.LargeEvery) == 0 {
		return 1500 + int(h>>8)%(96<<10) // fragmented
	}
	return 1 + int(h>>8)%300
}

func fillPayload(b []byte, a wire.Account, inst uint8, cmd uint64, size int) []byte {
	x := mix(uint64(a) ^ uint64(inst)<<56 ^ cmd)
	for i := 0; i < size; i++ {
		b = append(b, byte(x>>(8*(i&7)))+byte(i))
	}
	return b
}

func checkPayload(p []byte, a wire.Account, inst uint8, cmd uint64, size int) bool {
	if len(p) != size {
		return false
	}
	x := mix(uint64(a) ^ uint64(inst)<<56 ^ cmd)
	for i, c := range p {
		if c != byte(x>>(8*(i&7)))+byte(i) {
			return false
		}
	}
	return true
}

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
