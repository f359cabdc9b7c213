package node

import (
	"fmt"

	"github.com/seqd/seqd/wire"
)

// hotHot is the hot-hot half of Core (Config.HotHot). Every send of the
// handler gets an id from the stream position of the call that made it
// and goes first to the backlog, a FIFO ring of entries in id order; the
// active instance moves backlog entries into its send window as room
// allows, a passive one keeps them there as shadow entries. A command of
// the account seen in the stream (from any instance) drops every backlog
// entry up to its id: ids grow in send order on every instance alike.
type hotHot struct {
	on     bool
	active bool
	// origin is the seq whose delivery is running (0 outside one) and
	// sends the number of sends it made so far: the next id is
	// origin<<16 | sends.
	origin uint64
	sends  uint64
	seenID uint64 // highest id of the account's commands seen in the stream
	// The backlog ring: pend[(head+i) % len] for i < n. Each entry keeps
	// its own payload buffer, grown once and reused.
	pend    []pendEntry
	head, n int
	hbBuf   []byte
	sentAt  int64 // local time of the last frame sent (heartbeats run from it)
	sentAny bool
}

type pendEntry struct {
	id      uint64
	flags   uint8
	payload []byte
}

// maxSendsPerCall is the most sends one handler call can number: the
// index of a send lies in the id's low 16 bits.
const maxSendsPerCall = 1 << 16

func (c *Core) initHotHot() {
	if !c.cfg.HotHot {
		return
	}
	c.hh.on = true
	c.hh.pend = make([]pendEntry, c.cfg.HotHotBacklog)
	c.hh.hbBuf = make([]byte, wire.CommandHeaderBytes)
}

// Active reports whether this node is the active instance of its hot-hot
// account, as the stream delivered so far says (always false for a node
// that is not hot-hot).
func (c *Core) Active() bool { return c.hh.active }

// Backlog is the number of a hot-hot instance's sends not yet in its
// window: a passive's shadow entries, or an active's waiting for room.
func (c *Core) Backlog() int { return c.hh.n }

// nextID numbers a send of the handler call running.
func (c *Core) nextID() (uint64, error) {
	h := &c.hh
	if h.origin == 0 {
		return 0, ErrNotFromStream
	}
	if h.sends >= maxSendsPerCall {
		return 0, ErrTooManySends
	}
	id := h.origin<<16 | h.sends
	h.sends++
	return id, nil
}

// sendHot queues a hot-hot command with its id: into the backlog, then
// (active) as far into the window as it has room.
func (c *Core) sendHot(now int64, id uint64, flags uint8, payload []byte) (uint64, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(payload) > c.cfg.MaxMessageBytes {
		return 0, ErrTooLarge
	}
	h := &c.hh
	if id <= h.seenID {
		return id, nil // its copy is in the stream already
	}
	if h.n == len(h.pend) {
		c.fail(fmt.Errorf("%w: %d sends of account %s instance %d not in the stream yet", ErrHotHotBacklog, h.n, c.account, c.cfg.Instance))
		return 0, c.err
	}
	e := &h.pend[(h.head+h.n)%len(h.pend)]
	e.id, e.flags, e.payload = id, flags, append(e.payload[:0], payload...)
	h.n++
	c.stats.HotHotSends++
	c.drainBacklog(now)
	return id, nil
}

// drainBacklog moves backlog entries into the send window while there is
// room, when this instance is active and caught up with the stream.
func (c *Core) drainBacklog(now int64) {
	h := &c.hh
	if !h.active || h.n == 0 || c.Rewinding() || c.err != nil {
		return
	}
	for h.n > 0 {
		e := &h.pend[h.head]
		if e.id > h.seenID {
			size := len(e.payload)
			if c.InFlight() >= c.cfg.Window || c.InFlight() > 0 && c.inflightB+size > c.cfg.WindowBytes {
				return
			}
			if _, err := c.enqueue(now, e.payload, e.flags, 0, e.id); err != nil {
				return
			}
		}
		h.head = (h.head + 1) % len(h.pend)
		h.n--
	}
}

// seen notes a command of the account with id in the stream: backlog
// entries up to it were sent by whichever instance was active.
func (c *Core) seen(id uint64) {
	h := &c.hh
	if id <= h.seenID {
		return
	}
	h.seenID = id
	for h.n > 0 && h.pend[h.head].id <= id {
		h.head = (h.head + 1) % len(h.pend)
		h.n--
		c.stats.ShadowDropped++
	}
}

// pushFront puts a command back at the front of the backlog (fence).
func (c *Core) pushFront(id uint64, flags uint8, payload []byte) bool {
	h := &c.hh
	if h.n == len(h.pend) {
		return false
	}
	h.head = (h.head - 1 + len(h.pend)) % len(h.pend)
	h.n++
	e := &h.pend[h.head]
	e.id, e.flags, e.payload = id, flags, append(e.payload[:0], payload...)
	return true
}

// observeHot is observe for a hot-hot node: activation changes of its
// account, its commands (by id, from either instance), and the fencing
// and duplicate rejections of its own. It reports whether it handled the
// record (the rest goes to observe's ordinary path: incarnations,
// rejections for other reasons, control commands).
func (c *Core) observeHot(acct wire.Account, inst uint8, cmdSeq uint64, flags uint8, payload []byte, x *wire.Internal) bool {
	h := &c.hh
	mine := inst == c.cfg.Instance
	if x != nil {
		if x.Account != c.account {
			return acct != c.account // a control record of this node: ordinary path
		}
		switch x.Type {
		case wire.InternalNodeActivated:
			if x.Instance == c.cfg.Instance {
				h.active = true
				c.drainBacklog(c.clock)
			} else if h.active {
				c.fence()
			}
			return true
		case wire.InternalNodeDeactivated:
			if x.Instance == c.cfg.Instance && h.active {
				c.fence()
			}
			return true
		case wire.InternalRejected:
			r := wire.RejectReason(x.Value)
			if x.Instance == c.cfg.Instance && (r == wire.RejectNotActive || r == wire.RejectDuplicateID) {
				// Fenced, or a copy of a command the partner had
				// sequenced: the command seq is used up, and the command
				// is in (or will be in) the stream from the active one.
				if uint64(x.Extra) == c.cfg.Incarnation {
					c.ack(x.ID + c.cmdBase)
					c.stats.HotHotFenced++
				}
				return true
			}
		}
		return false
	}
	if acct != c.account || flags&wire.FlagSeqGen != 0 || cmdSeq == 0 {
		return true
	}
	if flags&wire.FlagFragment != 0 && payload == nil {
		return true // a held fragment: the whole command comes later
	}
	// cmdSeq is the command's id (the sequencer puts the id of a hot-hot
	// command in its record).
	if mine && c.announced {
		for q := c.acked + 1; q < c.nextCmd; q++ {
			if s := c.slot(q); s.id == cmdSeq {
				if s.matches(flags, payload, nil) {
					c.ack(q)
				}
				break
			}
		}
	}
	c.seen(cmdSeq)
	return true
}

// fence makes this instance passive: the commands of its window that did
// not make it into the stream go back to the front of the backlog (the
// new active sends its own copies, which drop them), and the window
// starts afresh under a new incarnation, so that a frame of the old one
// still on its way is dropped by the sequencer rather than sequenced.
func (c *Core) fence() {
	h := &c.hh
	h.active = false
	for q := c.nextCmd - 1; q > c.acked; q-- {
		if s := c.slot(q); s.id > h.seenID && !c.pushFront(s.id, s.flags, s.payload) {
			c.fail(fmt.Errorf("%w: fencing %d commands", ErrHotHotBacklog, c.nextCmd-1-c.acked))
			return
		}
	}
	for q := c.acked + 1; q < c.nextCmd; q++ {
		s := c.slot(q)
		c.inflightB -= len(s.payload)
		if s.resent {
			s.resent = false
			c.resentInFlight--
		}
		s.payload = nil
		if s.arenaEnd != 0 {
			c.arenaTail, s.arenaEnd = s.arenaEnd, 0
		}
	}
	c.acked = c.nextCmd - 1
	c.cfg.Incarnation++
	c.cmdBase = c.acked
	c.announced = false
	c.frameOpen = false
	c.backoff, c.rto = 0, c.rtoBase
	c.stats.Deactivations++
}

// heartbeatHot sends an empty hot-hot frame when nothing was sent for
// HotHotHeartbeat, once the node is caught up with the live stream.
func (c *Core) heartbeatHot(now int64) {
	h := &c.hh
	if h.sentAny && now-h.sentAt < int64(c.cfg.HotHotHeartbeat) || !c.r.Started() || c.Rewinding() {
		return
	}
	if c.frameOpen {
		c.flushFrame()
		return
	}
	var w wire.CommandWriter
	_ = w.Reset(h.hbBuf, c.account, c.cfg.Instance, c.cfg.Incarnation, c.streamSession())
	w.SetHotHot()
	c.out.Send(w.Bytes())
	h.sentAt, h.sentAny = now, true
	c.stats.HotHotHeartbeats++
}

// hotDue is when heartbeatHot will next send.
func (c *Core) hotDue() (int64, bool) {
	if !c.hh.on || !c.hh.sentAny {
		return 0, false
	}
	return c.hh.sentAt + int64(c.cfg.HotHotHeartbeat), true
}
