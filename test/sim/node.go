package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// simNode is one node process plus what the checker knows about it. A
// restart replaces the core (a new process: new incarnation, its own
// delivered stream from the start) over the same client.
type simNode struct {
	w        *world
	idx      int
	name     string
	account  wire.Account
	instance uint8
	readOnly bool
	late     bool // joined from the live tail: its stream starts mid-way
	// mustDiverge: it delivered past an epoch change's cut, so it must
	// stop with ErrDiverged (fast mode) before it delivers anything else.
	mustDiverge bool
	lastEpoch   uint32 // epoch of the last delivery (fence.go)
	// mayLose: a read-only node the test cut off for longer than the ring
	// holds; it must stop with ErrUnrecoverable (lost), nothing else.
	mayLose bool
	lost    error
	fast    bool // delivers on arrival (node.Fast)
	far     bool // a node of the bridge's far site (bridge.go)
	client  transport.Client
	peer    transport.Peer
	core    *node.Core

	target      int    // commands to send
	restartAt   uint64 // crash after this many commands (0: never), once
	sent        uint64 // application commands issued in this incarnation
	cmds        uint64 // cmdSeq of the last command issued (timer requests included)
	incarnation uint64
	delivered   uint64 // last seq seen by OnMessage
	first       uint64 // first seq seen by OnMessage (a late joiner's start)
	// Per sender, as seen in the delivered stream: its incarnation (from
	// InternalIncarnation records; 0 = not seen yet, for a late joiner)
	// and the last command delivered in it.
	inc map[senderKey]uint64
	// stream checks the numbering of seqs and of each sender's commands
	// (test/check).
	stream *check.Stream
	buf    []byte

	// tooLarge: this incarnation's commands larger than the sequencer
	// takes (payloadSize); each must come back OnRejected, once
	// (rejected), and never be sequenced.
	tooLarge map[uint64]bool
	rejected map[uint64]bool

	timerID   uint64          // last centralized timer id used
	periodic  map[uint64]int  // this node's periodic timers: fires seen
	cancelled map[uint64]bool // cancels issued
	gone      map[uint64]bool // cancels seen in the stream

	onFrame transport.Handler
	// rclient reaches the replayer's NAK endpoint (Config.Replayer).
	rclient  transport.Client
	onRepair transport.Handler

	// tamper, for the checker's self-tests only, corrupts this node's
	// deliveries at seq tamperAt: a checker that cannot fail is no checker.
	tamper   tamperKind
	tamperAt uint64
	held     *node.Message
}

type tamperKind uint8

const (
	tamperNone  tamperKind = iota
	tamperSkip             // a message is never delivered
	tamperTwice            // a message is delivered twice
	tamperSwap             // a message is delivered after the next one
)

type senderKey struct {
	account  wire.Account
	instance uint8
}

// late: a read-only node that joins from the live tail; it must be set
// before the core starts, since it chooses the core's Rewind and the
// stream check.
func newSimNode(w *world, i int, readOnly, late bool) (*simNode, error) {
	n := &simNode{
		w:           w,
		idx:         i,
		name:        fmt.Sprintf("n%d", i),
		instance:    1,
		readOnly:    readOnly,
		late:        late,
		incarnation: 1,
	}
	if !readOnly {
		n.target = w.cfg.Commands / w.cfg.Senders
		if i == 0 {
			n.target += w.cfg.Commands % w.cfg.Senders
		}
		// About one run in two crashes one sender once, somewhere in the
		// second half of its commands.
		if w.cfg.Restarts && w.rng.IntN(2*w.cfg.Senders) == 0 {
			n.restartAt = uint64(n.target/2 + w.rng.IntN(n.target/2+1))
		}
	}
	n.account = wire.MustAccount(n.name)
	n.client = w.net.Client()
	n.peer = n.client.(interface{ Peer() transport.Peer }).Peer()
	n.onFrame = n.frame
	if w.rep != nil {
		n.rclient = w.rep.net.Client()
		n.onRepair = n.repairFrame
	}
	return n, n.start()
}

// start builds the node's core: at the run's start, after a restart, or
// for a late joiner (which starts from the live tail).
func (n *simNode) start() error {
	w := n.w
	cfg := node.DefaultConfig()
	cfg.Account = n.name
	cfg.Instance = n.instance
	cfg.Incarnation = n.incarnation
	cfg.Session = 1
	cfg.ReadOnly = n.readOnly
	// Every node but the late joiner checks the stream from seq 1: it
	// rewinds from what the sequencer's ring holds (the ring holds the
	// whole run). The late joiner starts from the live tail.
	cfg.Rewind = !n.late
	cfg.Seed = w.cfg.Seed*131 + uint64(n.idx) + n.incarnation<<20
	cfg.Window = 64 + 64*(n.idx%3)
	cfg.ResendInterval = 5 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	if w.rep != nil && !n.far {
		cfg.Replayers = []string{"replayer"} // source 1: rclient
	}
	if n.idx%2 == 1 {
		cfg.Mode = node.Fast
		n.fast = true
	}
	core, err := node.NewCore(cfg, n, n)
	if err != nil {
		return err
	}
	n.core = core
	n.delivered, n.first, n.mustDiverge = 0, 0, false // a new process owes nothing
	n.inc = map[senderKey]uint64{}
	n.stream = check.New(check.Config{FirstSeq: 1})
	if n.late {
		n.stream = check.New(check.Config{Late: true}) // a late joiner starts at the live tail
	}
	n.periodic = map[uint64]int{}
	n.cancelled = map[uint64]bool{}
	n.tooLarge, n.rejected = map[uint64]bool{}, map[uint64]bool{}
	n.gone = map[uint64]bool{}
	return nil
}

// restart crashes the node and starts it again as a new incarnation: its
// unacked commands are lost with the process, and it numbers from 1.
func (n *simNode) restart() {
	n.incarnation++
	n.sent, n.cmds = 0, 0
	if err := n.start(); err != nil {
		n.w.fail("%s restart: %v", n.name, err)
	}
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
	if err := n.core.Step(n.w.now, frame); err != nil && !n.tolerated(err) {
		n.w.fail("%s rejected a frame: %v", n.name, err)
	}
}

// tolerated: the node stopped as it had to (see mustDiverge, mayLose).
func (n *simNode) tolerated(err error) bool {
	return n.mustDiverge && errors.Is(err, node.ErrDiverged) || n.mayLose && errors.Is(err, node.ErrUnrecoverable)
}

// work issues commands while the window has room, and now and then sets
// or cancels a centralized timer, or crashes and restarts.
func (n *simNode) work() {
	if n.readOnly {
		return
	}
	w := n.w
	if w.now < w.idleUntil {
		return
	}
	// A crash with a periodic timer live would leave it firing forever
	// (its cancel dies with the process): crash only without one.
	if n.restartAt != 0 && n.sent >= n.restartAt && n.activeTimers() == 0 {
		n.restartAt = 0
		n.restart()
	}
	if w.cfg.Timers {
		n.timers()
	}
	burst := 1 + w.rng.IntN(8)
	for i := 0; i < burst && n.sent < uint64(n.target); i++ {
		cmd := n.cmds + 1
		size := payloadSize(w.cfg, n.account, n.incarnation, cmd)
		n.buf = fillPayload(n.buf[:0], n.account, n.instance, n.incarnation, cmd, size)
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
		n.sent++
		n.cmds = cmd
		if size > simMaxMessage {
			n.tooLarge[cmd] = true
		}
	}
	n.core.Flush(w.now)
}

// timers sets one-shot and periodic centralized timers on sequencer time,
// and cancels each periodic timer after it fired a few times, so that the
// stream ends (and idle hours are idle).
func (n *simNode) timers() {
	w := n.w
	for id, fired := range n.periodic {
		if fired >= 3 && !n.cancelled[id] {
			if n.core.CancelTimer(w.now, id) == nil {
				n.cancelled[id] = true
				n.cmds++
			}
		}
	}
	if w.rng.IntN(3000) != 0 || n.sent >= uint64(n.target) {
		return
	}
	at := n.core.Now() + int64(w.rng.IntN(int(20*time.Millisecond)))
	var period int64
	if w.rng.IntN(3) == 0 {
		period = int64(time.Millisecond) * int64(1+w.rng.IntN(10))
	}
	if n.core.SendTimer(w.now, n.timerID+1, at, period) != nil {
		return // window full: another time
	}
	n.timerID++
	n.cmds++
	if period > 0 {
		n.periodic[n.timerID] = 0
	}
}

// activeTimers is the number of periodic timers whose cancel is not yet
// in the stream.
func (n *simNode) activeTimers() int {
	k := 0
	for id := range n.periodic {
		if !n.gone[id] {
			k++
		}
	}
	return k
}

func (n *simNode) receive() {
	if n.lost != nil {
		return
	}
	if _, err := n.client.Poll(n.onFrame, 0); err != nil {
		n.w.fail("%s poll: %v", n.name, err)
	}
	if n.rclient != nil {
		if _, err := n.rclient.Poll(n.onRepair, 0); err != nil {
			n.w.fail("%s poll (replayer): %v", n.name, err)
		}
	}
	n.core.Tick(n.w.now)
	if err := n.core.Err(); err != nil && n.mayLose && errors.Is(err, node.ErrUnrecoverable) {
		n.lost = err
		return
	}
	if err := n.core.Err(); err != nil && !n.diverged(err) {
		n.w.fail("%s stopped: %v", n.name, err)
	}
}

// OnMessage checks every delivery against the sequencer's truth.
func (n *simNode) OnMessage(m *node.Message) {
	if n.tamper == tamperNone || m.Seq != n.tamperAt && n.held == nil {
		n.check(m)
		return
	}
	switch n.tamper {
	case tamperSkip:
	case tamperTwice:
		n.check(m)
		n.check(m)
	case tamperSwap:
		if n.held == nil {
			c := *m
			c.Payload = append([]byte(nil), m.Payload...)
			n.held = &c
			return
		}
		n.check(m)
		n.check(n.held)
	}
	n.tamper = tamperNone
}

// check is OnMessage's checker; the checker's self-tests call it with
// tampered deliveries.
func (n *simNode) check(m *node.Message) {
	w := n.w
	v := n.stream.Observe(m)
	if v.Fault == check.SeqRepeat || v.Fault == check.SeqGap {
		w.fail("%s delivered seq %d after %d (gap or repeat)", n.name, m.Seq, n.delivered)
		return
	}
	if !n.fence(m) {
		return
	}
	if n.first == 0 {
		n.first = m.Seq
	}
	n.delivered = m.Seq
	e, cut := w.cutEntry(m.Epoch, m.Seq)
	switch {
	case cut && !n.fast:
		w.fail("%s (safe mode) delivered seq %d of epoch %d, which the epoch change cut", n.name, m.Seq, m.Epoch)
		return
	case cut && n.core.Epoch() > m.Epoch:
		w.fail("%s delivered seq %d of epoch %d after it learned of epoch %d, which cut it", n.name, m.Seq, m.Epoch, n.core.Epoch())
		return
	case cut:
		n.mustDiverge = true // a fast node ran ahead of the cut: it must stop
	case m.Seq > uint64(len(w.log)):
		w.fail("%s delivered seq %d the sequencer never published", n.name, m.Seq)
		return
	default:
		e = &w.log[m.Seq-1]
	}
	if e.account != m.Account || e.instance != m.Instance || e.cmdSeq != m.CmdSeq || e.time != m.Time ||
		e.flags != m.Flags&^wire.FlagFragment || e.epoch != m.Epoch {
		w.fail("%s seq %d differs from the sequencer's: got %v/%d cmd %d t=%d flags %x epoch %d, want %v/%d cmd %d t=%d flags %x epoch %d",
			n.name, m.Seq, m.Account, m.Instance, m.CmdSeq, m.Time, m.Flags, m.Epoch, e.account, e.instance, e.cmdSeq, e.time, e.flags, e.epoch)
		return
	}
	if m.Mine() != (m.Account == n.account && m.Flags&wire.FlagSeqGen == 0) {
		w.fail("%s Mine()=%v for account %v flags %x", n.name, m.Mine(), m.Account, m.Flags)
	}
	if m.Internal() {
		n.checkInternal(m, e)
		if m.Flags&wire.FlagSeqGen != 0 || m.CmdSeq == 0 {
			return
		}
		// A timer request is a command: it takes its place in its
		// sender's numbering.
	}
	if m.Account == pairAccount {
		return // numbered from the stream: the pair's own check (hothot.go)
	}
	if !m.Internal() && len(m.Payload) > simMaxMessage {
		w.fail("%s seq %d: command %d of %v/%d (%d bytes) was sequenced; the sequencer's MaxMessageBytes is %d",
			n.name, m.Seq, m.CmdSeq, m.Account, m.Instance, len(m.Payload), simMaxMessage)
		return
	}
	if v.Fault != check.OK {
		w.fail("%s got command %d of %v/%d after %d: not exactly once", n.name, m.CmdSeq, m.Account, m.Instance, v.PrevCmd)
		return
	}
	k := senderKey{m.Account, m.Instance}
	inc := n.inc[k]
	if inc == 0 || m.Internal() {
		return // a late joiner that missed this incarnation's announcement
	}
	size := payloadSize(w.cfg, m.Account, inc, m.CmdSeq)
	if !checkPayload(m.Payload, m.Account, m.Instance, inc, m.CmdSeq, size) {
		w.fail("%s seq %d: payload of %v cmd %d (incarnation %d) corrupt (len %d, want %d)", n.name, m.Seq, m.Account, m.CmdSeq, inc, len(m.Payload), size)
	}
}

// checkInternal checks an internal message's payload against the truth
// and follows incarnations and this node's timers.
func (n *simNode) checkInternal(m *node.Message, e *entry) {
	w := n.w
	var x wire.Internal
	if err := m.DecodeInternal(&x); err != nil || x != e.internal {
		w.fail("%s seq %d: internal payload %+v (%v), want %+v", n.name, m.Seq, x, err, e.internal)
		return
	}
	switch x.Type {
	case wire.InternalIncarnation:
		k := senderKey{x.Account, x.Instance}
		n.inc[k] = x.Value // the check numbers its commands from 1 again
	case wire.InternalTimer:
		if int64(x.Value) > m.Time {
			w.fail("%s seq %d: timer %d of %v fired at %d, before its time %d", n.name, m.Seq, x.ID, x.Account, m.Time, x.Value)
		}
		if x.Account == n.account && x.Instance == n.instance {
			if _, ok := n.periodic[x.ID]; ok {
				n.periodic[x.ID]++
			}
		}
	case wire.InternalTimerCancel:
		if x.Account == n.account && x.Instance == n.instance {
			n.gone[x.ID] = true
		}
	case wire.InternalRejected:
		// The sim's senders send only what a sequencer takes, but for
		// the commands made too large on purpose; the pair's refusals
		// (NotActive, DuplicateID) are its own check's (hothot.go).
		if x.Account == pairAccount {
			break
		}
		size := payloadSize(w.cfg, x.Account, uint64(x.Extra), x.ID)
		if wire.RejectReason(x.Value) != wire.RejectTooLarge || size <= simMaxMessage {
			w.fail("%s seq %d: the sequencer refused command %d of %v/%d (incarnation %d, %d bytes, limit %d): %v",
				n.name, m.Seq, x.ID, x.Account, x.Instance, x.Extra, size, simMaxMessage, wire.RejectReason(x.Value))
		}
	}
}

// OnRejected is the node's word that the sequencer refused one of its
// commands: only one made too large on purpose, and each once.
func (n *simNode) OnRejected(cmdSeq uint64, err error) {
	var re *node.RejectedError
	switch {
	case !errors.As(err, &re) || re.Reason != wire.RejectTooLarge || re.CmdSeq != cmdSeq:
		n.w.fail("%s: command %d refused with %v; only a command larger than MaxMessageBytes may be", n.name, cmdSeq, err)
	case !n.tooLarge[cmdSeq]:
		n.w.fail("%s: command %d (incarnation %d) refused as too large, but it fits (%d bytes, limit %d)",
			n.name, cmdSeq, n.incarnation, payloadSize(n.w.cfg, n.account, n.incarnation, cmdSeq), simMaxMessage)
	case n.rejected[cmdSeq]:
		n.w.fail("%s: command %d refused twice (OnRejected)", n.name, cmdSeq)
	}
	n.rejected[cmdSeq] = true
}

// finalCheck: every command of every sender's current incarnation was
// delivered exactly once.
func (n *simNode) finalCheck() error {
	if err := n.fenceDone(); err != nil {
		return err
	}
	for cmd := range n.tooLarge {
		if !n.rejected[cmd] {
			return fmt.Errorf("%w: %s (incarnation %d) was never told (OnRejected) that its command %d, larger than MaxMessageBytes, was refused",
				ErrInvariant, n.name, n.incarnation, cmd)
		}
	}
	for _, s := range n.w.senders() {
		if s.readOnly {
			continue
		}
		k := senderKey{s.account, s.instance}
		if inc := n.inc[k]; inc != 0 && inc != s.incarnation {
			return fmt.Errorf("%w: %s last saw incarnation %d of %s, which is at %d", ErrInvariant, n.name, inc, s.name, s.incarnation)
		}
		got := n.stream.LastCmd(check.Sender{Account: s.account, Instance: s.instance})
		if got == 0 && n.late && !n.w.commandSince(s, n.joinedAt()) {
			continue // the sender was done before the late joiner's start
		}
		if got != s.cmds {
			return fmt.Errorf("%w: %s delivered %d commands of %s (incarnation %d), which sent %d", ErrInvariant, n.name, got, s.name, s.incarnation, s.cmds)
		}
	}
	return nil
}

// joinedAt is the first seq this core delivered; for a late joiner that
// joined an idle tail and delivered nothing yet, the seq after that tail.
func (n *simNode) joinedAt() uint64 {
	if n.first != 0 {
		return n.first
	}
	return n.core.Delivered() + 1
}

// commandSince reports whether the stream holds a command of sender s
// at seq from or later.
func (w *world) commandSince(s *simNode, from uint64) bool {
	for i := max(from, 1) - 1; i < uint64(len(w.log)); i++ {
		e := &w.log[i]
		if e.account == s.account && e.instance == s.instance && e.flags&wire.FlagSeqGen == 0 && e.cmdSeq != 0 {
			return true
		}
	}
	return false
}

// payloadSize is a deterministic function of the command's identity so
// that every receiver can check a payload without seeing the send.
func payloadSize(cfg Config, a wire.Account, inc, cmd uint64) int {
	h := mix(uint64(a) ^ cmd*0x9e3779b97f4a7c15 ^ cfg.Seed ^ inc<<40)
	if cfg.TooLarge && (h>>32)%tooLargeEvery == 0 {
		return simMaxMessage + 1 + int(h>>8)%4096 // refused
	}
	if cfg.LargeEvery > 0 && h%uint64(cfg.LargeEvery) == 0 {
		return 1500 + int(h>>8)%(96<<10) // fragmented
	}
	return 1 + int(h>>8)%300
}

// simMaxMessage is the sim's sequencers' MaxMessageBytes: above the
// largest fragmented command payloadSize makes (1500 + 96 KiB), below
// the ones made too large on purpose (Config.TooLarge): one command in
// tooLargeEvery, about four a 2000-command seed.
const (
	simMaxMessage = 100 << 10
	tooLargeEvery = 500
)

func fillPayload(b []byte, a wire.Account, inst uint8, inc, cmd uint64, size int) []byte {
	x := mix(uint64(a) ^ uint64(inst)<<56 ^ cmd ^ inc<<32)
	for i := 0; i < size; i++ {
		b = append(b, byte(x>>(8*(i&7)))+byte(i))
	}
	return b
}

func checkPayload(p []byte, a wire.Account, inst uint8, inc, cmd uint64, size int) bool {
	if len(p) != size {
		return false
	}
	x := mix(uint64(a) ^ uint64(inst)<<56 ^ cmd ^ inc<<32)
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
