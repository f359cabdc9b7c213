package node

import (
	"fmt"
	"hash/maphash"

	"github.com/seqd/seqd/wire"
)

// cmdSlot keeps a copy of one unacked command for resends. The payload
// lives in the send arena (a byte ring, see send) when it fits there, else
// in its own buffer, dropped at the ack.
type cmdSlot struct {
	flags  uint8
	id     uint64 // hot-hot command id (0: not hot-hot)
	resent bool   // sent more than once: its ack is no RTT sample (Karn)
	// rewound: sent while the node was replaying history (Rewinding).
	// Its ack can be seen only once the replay reaches it, seconds later
	// for a restarted node: that latency is the replay's, not the path's,
	// so it is no RTT sample either.
	rewound bool
	sentAt  int64 // first send (local clock): the start of its RTT sample
	lastAt  int64 // last send: its resend timer runs from here
	// after is the highest seq known to exist when it was last sent: it
	// can appear in the stream only after it, so its ack cannot come
	// before the node delivered that far.
	after uint64
	// sum tells this command from another process's command of the same
	// number (equal incarnations): a hash of the payload, or the timer ID
	// of a timer request (the stream echoes those as internal records).
	// Comparing the payload kept for resends instead cost more: by the
	// time the ack comes, that copy has left the cache (a window of
	// payloads later), while the hashes read bytes just written or just
	// received.
	sum     uint64
	payload []byte
	// arenaEnd is the arena position just past payload (0: not in the
	// arena). Acking the slot frees the arena up to it.
	arenaEnd uint64
}

// maxArenaBytes bounds the memory reserved up front for the payloads of
// commands in flight.
const maxArenaBytes = 16 << 20

// sumSeed seeds the command checksums; they are compared only within this
// process, so a per-process seed is enough.
var sumSeed = maphash.MakeSeed()

// send is the sending half of Core.
type send struct {
	// Commands are numbered 1, 2, ... for the life of the Core (Send
	// returns the number). On the wire cmdSeq = number - cmdBase: it
	// restarts at 1 with each incarnation the Core starts because the
	// sequencer lost its entry (renumber).
	nextCmd   uint64 // number of the next command
	cmdBase   uint64
	acked     uint64 // every cmdSeq <= acked was seen in the stream
	inflightB int    // payload bytes of the unacked commands
	cmds      []cmdSlot
	// arena keeps the payloads of the commands in flight, one after the
	// other, as a FIFO byte ring: commands are acked in cmdSeq order, so
	// the oldest bytes are always the first freed. arenaHead counts the
	// bytes ever reserved (and skipped at the wrap: a payload is
	// contiguous), arenaTail those freed; a payload that does not fit in
	// what is free gets its own buffer. Consecutive commands share cache
	// lines and pages (fixed slots of up to 16 KiB touched a fresh page
	// and missed the cache on every copy).
	arena     []byte
	arenaHead uint64
	arenaTail uint64
	maxWhole  int // largest payload sent as one record
	frameBuf  []byte
	cw        wire.CommandWriter
	cmd       wire.Command
	frameOpen bool
	// frameSince is when the open frame got its first command.
	frameSince int64
	timerBuf   [wire.TimerRequestBytes]byte

	// Incarnations of this Account/Instance seen in the stream.
	lastInc   uint64 // the last one announced (acks count only while it is ours)
	announced bool   // this incarnation was announced: its commands are being sequenced

	// Resend timer (RFC 6298): the ack latency (send to seen in the
	// stream) is smoothed into srtt and rttvar; rto = srtt + 4*rttvar
	// within [MinResendInterval, MaxResendInterval], ResendInterval until
	// the first sample, doubled each time the oldest command times out.
	srtt, rttvar   int64
	hasRTT         bool
	sampledSentAt  int64 // send time of the last command sampled
	rtoBase        int64 // from the samples (ResendInterval before the first)
	backoff        uint8 // timeouts of the oldest command with no ack between
	rto            int64 // rtoBase << backoff, at most MaxResendInterval
	resentInFlight int   // unacked commands sent more than once
	// lastAckAt is when an ack last freed the oldest command. Every
	// command's timer runs from its own last send or from lastAckAt,
	// whichever is later (TCP restarts its timer on each ack): while acks
	// keep coming, late ones cost no resends.
	lastAckAt int64
	// ackSinceTimeout: an ack came since the oldest command last timed
	// out. A timeout doubles rto only without one: a stalled path, not one
	// lost command.
	ackSinceTimeout bool
	// behindAt is the last Tick at which the node had not yet delivered
	// the stream up to where its oldest command could appear (rewinding
	// from seq 1, repairing a gap, waiting for stable): no timer runs
	// then, as no ack can have come, whatever the network did.
	behindAt int64
	// heardAt is when the last stream packet (data or heartbeat) came.
	// Timers advance only with it: while the stream is silent (the
	// sequencer stalled, or the way back cut) no ack can come and no
	// resend can help, so a stall never costs a window of copies.
	heardAt int64
	clock   int64 // local time of the Step or Tick running (RTT samples)

	rejected RejectionHandler // nil unless the Handler implements it
}

func (c *Core) initSend() {
	c.nextCmd = 1
	c.maxWhole = min(c.cfg.MaxPacketBytes-wire.CommandHeaderBytes-wire.CommandRecordBytes, 0xFFFF)
	c.arena = make([]byte, min(c.maxWhole*c.cfg.Window, c.cfg.WindowBytes+c.maxWhole, maxArenaBytes))
	c.cmds = make([]cmdSlot, c.cfg.Window)
	c.frameBuf = make([]byte, c.cfg.MaxPacketBytes)
	c.rtoBase = min(int64(c.cfg.ResendInterval), int64(c.cfg.MaxResendInterval))
	c.rto = c.rtoBase
}

// Send queues payload as the next command and returns its cmdSeq. The
// payload is copied. The command goes out when its frame fills, on Flush,
// or on Tick; it is resent until seen in the stream.
//
// On a hot-hot account (Config.HotHot) it must be called from a handler
// callback for a stream message (else ErrNotFromStream) and returns the
// command's id instead.
func (c *Core) Send(now int64, payload []byte) (uint64, error) {
	return c.sendFlags(now, payload, 0)
}

// SendOOB is Send for an out-of-band command (wire.CmdOOB): a node that
// asks for it gets it on arrival, ahead of a gap before it
// (OOBHandler), as well as in order. docs/node.md says what it does and
// does not promise.
func (c *Core) SendOOB(now int64, payload []byte) (uint64, error) {
	return c.sendFlags(now, payload, wire.CmdOOB)
}

func (c *Core) sendFlags(now int64, payload []byte, flags uint8) (uint64, error) {
	if c.hh.on {
		id, err := c.nextID()
		if err != nil {
			return 0, err
		}
		return c.sendHot(now, id, flags, payload)
	}
	return c.enqueue(now, payload, flags, 0, 0)
}

// Control asks the sequencer, by a command, to make instance of account
// a active (wire.ControlActivate) or passive (wire.ControlForcePassive,
// its live partner taking over). The request and the switch appear in
// the stream; a request the sequencer cannot carry out (an instance it
// has no record of, no live partner) comes back as a rejection
// (RejectionHandler, wire.RejectControl).
func (c *Core) Control(now int64, op uint8, a wire.Account, instance uint8) (uint64, error) {
	b, err := wire.AppendControl(c.timerBuf[:], &wire.ControlRequest{Op: op, Instance: instance, Account: a})
	if err != nil {
		return 0, err
	}
	// A hot-hot instance sends it straight into its window (any id: the
	// sequencer dedupes no control request by id), active or not.
	return c.enqueue(now, b, wire.CmdControl, 0, 1)
}

// SendTimer asks the sequencer for centralized timer id at sequencer time
// at, then every period ns if period > 0. It fires as InternalTimer in the
// stream (OnTimer), at the same point on every node and replay. It uses a
// window slot like any command.
func (c *Core) SendTimer(now int64, id uint64, at, period int64) error {
	if c.hh.on {
		return ErrHotHotTimer
	}
	if period < 0 {
		return fmt.Errorf("%w: timer %d: period %dns, want >= 0 (0: once)", ErrTimer, id, period)
	}
	b, err := wire.AppendTimerRequest(c.timerBuf[:], &wire.TimerRequest{ID: id, At: at, Period: period})
	if err != nil {
		return err
	}
	_, err = c.enqueue(now, b, wire.CmdTimer, id, 0)
	return err
}

// CancelTimer cancels centralized timer id.
func (c *Core) CancelTimer(now int64, id uint64) error {
	if c.hh.on {
		return ErrHotHotTimer
	}
	b, err := wire.AppendTimerRequest(c.timerBuf[:], &wire.TimerRequest{ID: id, Cancel: true})
	if err != nil {
		return err
	}
	_, err = c.enqueue(now, b, wire.CmdTimer, id, 0)
	return err
}

// Incarnation is the incarnation this core sends as: Config.Incarnation,
// or one above every incarnation of its Account/Instance it saw in the
// stream before its first command.
func (c *Core) Incarnation() uint64 { return c.cfg.Incarnation }

// RTT returns the smoothed ack latency (0 before the first sample) and the
// resend timeout in use, in ns.
func (c *Core) RTT() (srtt, rto int64) { return c.srtt, c.rto }

func (c *Core) enqueue(now int64, payload []byte, flags uint8, timerID, hotID uint64) (uint64, error) {
	if c.cfg.ReadOnly {
		return 0, ErrReadOnly
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(payload) > c.cfg.MaxMessageBytes {
		return 0, ErrTooLarge
	}
	// Timer requests count toward Window but not WindowBytes: the shell,
	// which admits commands against the same limits, sees no payload.
	size := len(payload)
	if flags&wire.CmdTimer != 0 {
		size = 0
	}
	if c.InFlight() >= c.cfg.Window || c.InFlight() > 0 && c.inflightB+size > c.cfg.WindowBytes {
		return 0, ErrWindowFull
	}
	c.inflightB += size
	seq := c.nextCmd
	c.nextCmd++
	s := c.slot(seq)
	s.flags = flags
	s.id = hotID
	s.resent = false
	s.rewound = c.Rewinding()
	s.sentAt, s.lastAt = now, now
	s.after = c.streamTail()
	if b, end, ok := c.reserve(len(payload)); ok {
		s.payload, s.arenaEnd = b, end
		copy(b, payload)
	} else {
		s.payload, s.arenaEnd = append(make([]byte, 0, len(payload)), payload...), 0
	}
	if flags&wire.CmdTimer != 0 {
		s.sum = timerID
	} else {
		s.sum = maphash.Bytes(sumSeed, s.payload)
	}
	c.stats.CommandsSent++
	c.appendCommand(now, seq, s)
	return seq, nil
}

// reserve takes n contiguous bytes of the arena, or reports that they are
// not free (n is 0, or larger than what is free).
func (c *Core) reserve(n int) (b []byte, end uint64, ok bool) {
	size := uint64(len(c.arena))
	if n == 0 || uint64(n) > size {
		return nil, 0, false
	}
	head := c.arenaHead
	off := head % size
	if off+uint64(n) > size {
		head += size - off // skip the end of the ring
		off = 0
	}
	if head+uint64(n)-c.arenaTail > size {
		return nil, 0, false
	}
	c.arenaHead = head + uint64(n)
	return c.arena[off : off+uint64(n) : off+uint64(n)], c.arenaHead, true
}

func (c *Core) slot(cmdSeq uint64) *cmdSlot {
	return &c.cmds[cmdSeq%uint64(len(c.cmds))]
}

// minFragmentBytes avoids tiny fragments in the tail of a nearly full frame.
const minFragmentBytes = 64

// appendCommand writes one command into the open frame, fragmenting a
// payload that does not fit in one record. A full frame goes out at once.
func (c *Core) appendCommand(now int64, seq uint64, s *cmdSlot) {
	n := len(s.payload)
	cmd := &c.cmd
	cmd.CmdSeq = seq - c.cmdBase
	cmd.ID = s.id
	if n <= c.maxWhole {
		if c.frameOpen && c.cw.Room() < n {
			c.flushFrame()
		}
		c.openFrame(now)
		cmd.Flags, cmd.Total, cmd.Offset, cmd.Payload = s.flags, 0, 0, s.payload
		_ = c.cw.Append(cmd) // fits: checked above
		if c.cw.Room() <= 0 {
			c.flushFrame()
		}
		cmd.Payload = nil
		return
	}
	for off := 0; off < n; {
		c.openFrame(now)
		room := c.cw.FragmentRoom()
		if room < minFragmentBytes && room < n-off {
			c.flushFrame()
			c.openFrame(now)
			room = c.cw.FragmentRoom()
		}
		k := min(room, n-off, 0xFFFF)
		cmd.Flags, cmd.Total, cmd.Offset = s.flags|wire.CmdFragment, uint32(n), uint32(off)
		cmd.Payload = s.payload[off : off+k]
		_ = c.cw.Append(cmd)
		off += k
		if c.cw.FragmentRoom() < minFragmentBytes {
			c.flushFrame()
		}
	}
	cmd.Payload = nil
}

func (c *Core) openFrame(now int64) {
	if c.frameOpen {
		return
	}
	_ = c.cw.Reset(c.frameBuf, c.account, c.cfg.Instance, c.cfg.Incarnation, c.streamSession())
	if c.hh.on {
		c.cw.SetHotHot()
	}
	c.frameOpen = true
	c.frameSince = now
}

func (c *Core) flushFrame() {
	c.frameOpen = false
	if c.cw.Count() == 0 {
		return
	}
	c.out.Send(c.cw.Bytes())
	c.stats.CommandFrames++
	c.hh.sentAt, c.hh.sentAny = c.clock, true
}

// observe is the sending half's view of every delivered record (x is its
// decoded payload when the record is internal, else nil): acks of this
// node's commands, rejections, and the incarnations of its Account and
// Instance. It runs before the record is handed to OnMessage. With
// wire.FlagFragment in flags (and no payload) it tells of a stable
// fragment of the next message, held while the rest is repaired.
func (c *Core) observe(seq uint64, acct wire.Account, inst uint8, cmdSeq uint64, flags uint8, payload []byte, x *wire.Internal) {
	if c.cfg.ReadOnly || c.account == 0 {
		return
	}
	if c.hh.on && c.observeHot(acct, inst, cmdSeq, flags, payload, x) {
		return
	}
	if x != nil && x.Account == c.account && x.Instance == c.cfg.Instance {
		switch x.Type {
		case wire.InternalIncarnation:
			c.onIncarnation(seq, x.Value)
			return
		case wire.InternalRejected:
			if uint64(x.Extra) == c.cfg.Incarnation {
				c.onRejected(x.ID+c.cmdBase, wire.RejectReason(x.Value))
			}
			return
		case wire.InternalStaleIncarnation:
			if uint64(x.Extra) == c.cfg.Incarnation && x.Value > c.cfg.Incarnation {
				c.onStale(x.Value)
			}
			return
		case wire.InternalSenderForgotten:
			if uint64(x.Extra) == c.cfg.Incarnation {
				// Everything up to x.ID was sequenced (and delivered
				// before this record); the sequencer keeps nothing of
				// this sender now.
				c.ack(x.ID + c.cmdBase)
				c.renumber()
			}
			return
		}
	}
	if acct != c.account || inst != c.cfg.Instance || flags&wire.FlagSeqGen != 0 || cmdSeq == 0 {
		return
	}
	cmdSeq += c.cmdBase // this Core's number for it
	if flags&wire.FlagFragment != 0 {
		// A stable fragment of this node's large command, held while the
		// rest is repaired: the sequencer numbers a command only once it
		// has all of it, so the fragment proves it made it. Acking now
		// spares a resend of megabytes. No payload to check yet: only
		// once this incarnation was announced.
		if c.announced && cmdSeq > c.acked && cmdSeq < c.nextCmd {
			c.ack(cmdSeq)
		}
		return
	}
	// Only this incarnation's commands ack ours: a previous life's, seen
	// while rewinding, reuse the same cmdSeqs. A node that saw no
	// announcement at all (it joined live after its own) trusts the live
	// stream, but only records that match what it sent.
	if !c.announced {
		if c.lastInc == 0 && seq >= c.streamFirstLive() && cmdSeq > c.acked && cmdSeq < c.nextCmd &&
			c.slot(cmdSeq).matches(flags, payload, x) {
			c.ack(cmdSeq)
		}
		return
	}
	if cmdSeq <= c.acked {
		return // acked early by a held fragment (ackHeldFragments)
	}
	if cmdSeq >= c.nextCmd {
		c.duplicateSender(cmdSeq, "is beyond the last one this process sent")
		return
	}
	if !c.slot(cmdSeq).matches(flags, payload, x) {
		c.duplicateSender(cmdSeq, "differs from the one this process sent")
		return
	}
	c.ack(cmdSeq)
}

// matches reports whether a record seen in the stream under this node's
// identity is the command kept in s.
func (s *cmdSlot) matches(flags uint8, payload []byte, x *wire.Internal) bool {
	if s.flags&wire.CmdTimer != 0 {
		return x != nil && (x.Type == wire.InternalTimerSet || x.Type == wire.InternalTimerCancel) && x.ID == s.sum
	}
	if s.flags&wire.CmdControl != 0 {
		return x != nil && (x.Type == wire.InternalActivate || x.Type == wire.InternalForcePassive)
	}
	return flags&wire.FlagInternal == 0 && maphash.Bytes(sumSeed, payload) == s.sum
}

// onIncarnation handles an announcement of incarnation v for this node's
// Account/Instance at seq. Before its first command the node moves above
// every incarnation it sees, so that a restart configured (or clocked)
// below an earlier life is not ignored as stale by the sequencer. After
// that, another incarnation means another process took this identity
// over: this one stops instead of hanging with a full window.
func (c *Core) onIncarnation(seq, v uint64) {
	c.lastInc = v
	inc := c.cfg.Incarnation
	switch {
	case c.nextCmd == 1 && !c.hh.sentAny: // (a hot-hot heartbeat uses the incarnation too)
		if v >= inc {
			c.cfg.Incarnation = v + 1
			c.stats.IncarnationBumps++
		}
	case !c.announced && v < inc:
		// An earlier life, seen while rewinding; its commands ack nothing.
	case !c.announced && v == inc:
		c.announced = true
	case !c.announced && c.acked == c.cmdBase:
		// v > inc was announced before ours could be, so the sequencer
		// drops every frame of ours as stale and has sequenced none: take
		// an incarnation above v and send the window again under it.
		c.reincarnate(v)
	default:
		c.fail(fmt.Errorf("%w: account %s instance %d: incarnation %d announced at seq %d while this process sends as incarnation %d",
			ErrSuperseded, c.account, c.cfg.Instance, v, seq, inc))
	}
}

// onStale handles the sequencer's word that it drops this process's
// frames because incarnation v (> ours) is on record: this node restarted
// with a smaller wall-clock incarnation and joined live, so it never saw
// v announced. Unless some command of ours was sequenced (then v came
// after us: another process took the identity, which onIncarnation
// stops on), it moves above v and sends its window again.
func (c *Core) onStale(v uint64) {
	switch {
	case c.nextCmd == 1 && !c.hh.sentAny:
		c.cfg.Incarnation = v + 1
		c.stats.IncarnationBumps++
	case !c.announced && c.acked == c.cmdBase:
		c.reincarnate(v)
	}
}

// reincarnate takes an incarnation above v, which the sequencer holds for
// this Account/Instance while it sequenced none of this incarnation's
// commands, and sends the window again under it (same numbering: the new
// incarnation's commands count from cmdSeq 1 after cmdBase).
func (c *Core) reincarnate(v uint64) {
	c.cfg.Incarnation = v + 1
	c.stats.IncarnationBumps++
	c.frameOpen = false // its header names the old incarnation
	for q := c.acked + 1; q < c.nextCmd; q++ {
		s := c.slot(q)
		s.sentAt, s.lastAt, s.after = c.clock, c.clock, c.streamTail()
		s.rewound = c.Rewinding()
		c.appendCommand(c.clock, q, s)
	}
	if c.frameOpen {
		c.flushFrame()
	}
}

// onRejected turns the sequencer's refusal of command cmdSeq into an
// error for the application. The sequencer used the cmdSeq up, so it
// acks like a sequenced command and the later commands go on.
func (c *Core) onRejected(cmdSeq uint64, reason wire.RejectReason) {
	if cmdSeq <= c.acked {
		return
	}
	if cmdSeq >= c.nextCmd {
		if c.announced {
			c.duplicateSender(cmdSeq, "was rejected but is beyond the last one this process sent")
		}
		return
	}
	c.ack(cmdSeq)
	c.stats.Rejected++
	if c.rejected != nil {
		c.rejected.OnRejected(cmdSeq, &RejectedError{CmdSeq: cmdSeq, Reason: reason})
	}
	if reason == wire.RejectSenderTableFull && c.err == nil {
		// The sequencer has no entry for this sender: the commands after
		// this one would be dropped as out of order.
		c.renumber()
	}
}

// renumber starts a new incarnation whose commands count from cmdSeq 1
// again, because the sequencer has no entry for this sender (it forgot
// it, InternalSenderForgotten, or had no room for it,
// RejectSenderTableFull): it would drop any other first cmdSeq as out of
// order. The commands in flight keep their numbers for the application
// and are sent again at once under the new incarnation.
func (c *Core) renumber() {
	c.cfg.Incarnation++
	c.cmdBase = c.acked
	c.announced = false
	c.stats.Renumbered++
	c.frameOpen = false // its header names the old incarnation
	for q := c.acked + 1; q < c.nextCmd; q++ {
		s := c.slot(q)
		if s.resent {
			s.resent = false
			c.resentInFlight--
		}
		s.sentAt, s.lastAt, s.after = c.clock, c.clock, c.streamTail()
		s.rewound = c.Rewinding()
		c.appendCommand(c.clock, q, s)
	}
	if c.frameOpen {
		c.flushFrame()
	}
}

// duplicateSender stops the node: another process sends with the same
// account, instance and incarnation, so its commands would ack ours.
func (c *Core) duplicateSender(cmdSeq uint64, what string) {
	c.fail(fmt.Errorf("%w: account %s instance %d incarnation %d: command %d in the stream %s (next is %d); give every process its own incarnation",
		ErrDuplicateSender, c.account, c.cfg.Instance, c.cfg.Incarnation, cmdSeq, what, c.nextCmd))
}

// ack frees the window up to cmdSeq: the sequencer accepts a sender's
// commands only in order, so seeing cmdSeq means every earlier one made
// it. The latency of cmdSeq itself is an RTT sample unless it was resent
// (Karn: the ack may answer the first send or the last) or sent while
// rewinding (the ack waited for the replay).
func (c *Core) ack(cmdSeq uint64) {
	if cmdSeq <= c.acked || cmdSeq >= c.nextCmd {
		return
	}
	if s := c.slot(cmdSeq); !s.resent && !s.rewound && (!c.hasRTT || s.sentAt > c.sampledSentAt) {
		// One sample per send time: commands sent together and acked in
		// one packet would otherwise give hundreds of equal samples and
		// squeeze rttvar to nothing.
		c.sampledSentAt = s.sentAt
		c.sampleRTT(c.clock - s.sentAt)
	}
	c.lastAckAt = c.clock
	c.ackSinceTimeout = true
	if c.backoff != 0 {
		// Progress: the path works, whatever was lost. Like TCP, drop
		// the backoff on an ack of new data.
		c.backoff = 0
		c.rto = c.rtoBase
	}
	for q := c.acked + 1; q <= cmdSeq; q++ {
		s := c.slot(q)
		if s.flags&wire.CmdTimer == 0 {
			c.inflightB -= len(s.payload)
		}
		if s.resent {
			s.resent = false
			c.resentInFlight--
		}
		s.payload = nil
		if s.arenaEnd != 0 {
			// In order: everything before it in the arena was freed.
			c.arenaTail, s.arenaEnd = s.arenaEnd, 0
		}
	}
	c.stats.Acked += cmdSeq - c.acked
	c.acked = cmdSeq
}

// sampleRTT folds one ack latency into srtt and rttvar (RFC 6298 2.2-2.3)
// and sets the resend timeout from them, dropping any backoff.
func (c *Core) sampleRTT(r int64) {
	r = max(r, 0)
	if !c.hasRTT {
		c.hasRTT = true
		c.srtt, c.rttvar = r, r/2
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar += (d - c.rttvar) / 4
		c.srtt += (r - c.srtt) / 8
	}
	c.rtoBase = c.clampRTO(c.srtt + 4*c.rttvar)
	c.rto = c.rtoBase
	c.backoff = 0
}

func (c *Core) clampRTO(d int64) int64 {
	return min(max(d, int64(c.cfg.MinResendInterval)), int64(c.cfg.MaxResendInterval))
}

// nsPerByteInFlight stretches the resend timeout by the payload in
// flight (10 ns a byte: 100 MB/s); 256 KiB of small commands adds 2.6ms.
// Big commands take time to cross even a healthy link, and the first one
// has no RTT sample to go by.
const nsPerByteInFlight = 10

// resend sends again each unacked command whose own timer expired: the
// stream went on for rto since it was last sent (or since the last ack, or
// since the node caught up with the stream up to where it could appear,
// if later) without it: a packet, data or heartbeat, came rto after. Late
// acks that keep coming cost no resends, and a delay that grows past rto
// costs the commands sent before the acks stopped, not the whole window.
// A lost command and those behind it, which the sequencer dropped (it
// accepts only the next cmdSeq), are resent together once the acks stop
// for rto, in cmdSeq order. When the oldest command times out twice with
// no ack in between, the timeout doubles (up to MaxResendInterval) until
// an ack comes: resending faster than acks can come back only piles
// copies into the transport.
func (c *Core) resend(now int64) {
	if c.acked+1 >= c.nextCmd {
		return
	}
	delivered, tail := c.streamDelivered(), c.streamTail()
	head := c.slot(c.acked + 1)
	if behind(delivered, tail, c.waitsFor(c.acked+1, head)) {
		c.behindAt = now
		return
	}
	rto := c.rto + int64(c.inflightB)*nsPerByteInFlight
	from := max(c.lastAckAt, c.behindAt)
	// Never-resent commands time out in cmdSeq order: unless one was
	// resent, the oldest is the first due.
	heard := c.heardAt
	if c.resentInFlight == 0 && heard-max(head.lastAt, from) < rto {
		return
	}
	fired, oldest := false, false
	for q := c.acked + 1; q < c.nextCmd; q++ {
		s := c.slot(q)
		if heard-max(s.lastAt, from) < rto || behind(delivered, tail, c.waitsFor(q, s)) {
			continue
		}
		if !fired {
			fired = true
			c.stats.ResendScans++
			if c.frameOpen {
				c.flushFrame()
			}
		}
		oldest = oldest || q == c.acked+1
		if !s.resent {
			s.resent = true
			c.resentInFlight++
		}
		s.lastAt = now
		s.after = tail
		c.appendCommand(now, q, s)
		c.stats.Resends++
	}
	if fired && c.frameOpen {
		c.flushFrame()
	}
	if oldest {
		if !c.ackSinceTimeout && c.rto < int64(c.cfg.MaxResendInterval) {
			c.backoff++
			c.rto = min(c.rtoBase<<c.backoff, int64(c.cfg.MaxResendInterval))
		}
		c.ackSinceTimeout = false
	}
}

// behind reports whether the node has yet to deliver the stream up to
// after, the tail known when a command was sent: its ack cannot have come.
// A tail now below after (a new epoch cut the stream there) gates nothing:
// the command may have been cut, and the stream may not grow past after.
func behind(delivered, tail, after uint64) bool {
	return delivered < after && after <= tail
}

// waitsFor is the stream seq command q (in slot s) cannot be acked
// before: the tail when it was last sent or, when the receiver already
// took a record of this node's with cmdSeq q or a later one in the
// current epoch (waiting for stable, receiver/own.go), that record's seq:
// q lies in the stream at or below it, so its timer waits until the node
// delivers up to there. A new epoch may have cut the record: then only
// the tail at the send counts.
func (c *Core) waitsFor(q uint64, s *cmdSlot) uint64 {
	if cmd, at, ep, ok := c.r.OwnSeen(); ok && q <= cmd && ep == c.r.Epoch() {
		return max(s.after, at)
	}
	return s.after
}

// resendDue tells when resend will next find a command to send again, as
// it decides; false when nothing is in flight, the node is behind the
// stream or no packet came since a deadline (then a frame, not a timer,
// changes things).
func (c *Core) resendDue() (int64, bool) {
	if c.cfg.ReadOnly || c.acked+1 >= c.nextCmd {
		return 0, false
	}
	delivered, tail := c.streamDelivered(), c.streamTail()
	head := c.slot(c.acked + 1)
	if behind(delivered, tail, c.waitsFor(c.acked+1, head)) {
		return 0, false
	}
	rto := c.rto + int64(c.inflightB)*nsPerByteInFlight
	from := max(c.lastAckAt, c.behindAt)
	last := head.lastAt
	if c.resentInFlight > 0 { // rare (a stall): look at each
		for q := c.acked + 2; q < c.nextCmd; q++ {
			if s := c.slot(q); !behind(delivered, tail, c.waitsFor(q, s)) {
				last = min(last, s.lastAt)
			}
		}
	}
	if at := max(last, from) + rto; c.heardAt >= at {
		return at, true
	}
	return 0, false // a packet heard after the deadline will tell
}

// heard notes a stream packet (data or heartbeat) at now: evidence that
// acks could come, which resend timers wait for.
func (c *Core) heard(now int64) {
	c.heardAt = now
	q := &c.quiet
	q.quietSince, q.quietSet = now, true
	if q.told {
		q.told, q.tellAfter = false, 0
		if c.sil != nil {
			c.sil.OnStreamResumed()
		}
	}
}

// The receiving half's state the sending half reads: what was delivered,
// the highest seq known to exist, the first seq seen live, the session.
func (c *Core) streamDelivered() uint64 { return c.next - 1 }
func (c *Core) streamTail() uint64      { return c.r.Tail() }
func (c *Core) streamFirstLive() uint64 { return c.r.FirstLive() }
func (c *Core) streamSession() uint64   { return c.r.Session() }
