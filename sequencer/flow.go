package sequencer

import (
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Flow control (Aeron's "min" policy, adapted to a sequencer): receivers
// report their position (wire.Status: the highest seq they hold with no
// gap) every few milliseconds. The stream may run ahead of the slowest
// receiver that matters by at most FlowWindowPercent of the ring's bytes;
// past that the Core stops sequencing commands (their frames are dropped,
// counted as FlowPaused, and the nodes resend them after their backoff)
// until that receiver catches up. So, under full load, no receiver that
// matters falls off the retransmit ring.
//
// Receivers that matter are those that send commands (a Status without
// wire.StatusReadOnly, of an account and instance with a command in the
// stream) and reported within FlowReceiverTimeout; standby
// sequencers (wire.StatusStandby) matter as a quorum, through stable, not
// one by one (updateFlowLimit). A tail or
// other read-only receiver never slows the stream: when it falls off the
// ring it gets Gone and rewinds or stops with a clear error. A receiver
// that stops reporting (dead, partitioned) stops counting after the
// timeout, so it cannot stall the stream for long.

// receiverEntry is one receiver's last report.
type receiverEntry struct {
	account     wire.Account
	instance    uint8
	flags       uint16
	incarnation uint64
	member      uint64         // a standby's cluster member id (wire.StatusStandby)
	peer        transport.Peer // tells anonymous receivers (tails) apart
	contiguous  uint64
	delivered   uint64
	heard       int64 // mono time of the last report
}

func (e *receiverEntry) matters() bool { return e.flags&wire.StatusReadOnly == 0 }

func (e *receiverEntry) standby() bool { return e.flags&wire.StatusStandby != 0 }

// flowTable holds the receivers' reports: at most MaxReceivers, the least
// recently heard forgotten first. It is small and visited only on reports
// and ticks, so a linear scan is cheaper than a map and allocates nothing.
type flowTable struct {
	list []receiverEntry
	// limitPos is the ring position the stream may grow to before the
	// slowest receiver that matters would be FlowWindowBytes behind; 0 =
	// no limit (no such receiver).
	limitPos uint64
	slowest  uint64 // its contiguous seq (for Stats)
	updated  int64  // mono time of the last updateFlowLimit
	// byStable: a standby was heard, so stable is one of the positions
	// that matter (SetStable recomputes the limit when stable moves).
	byStable bool
}

func (t *flowTable) init(capacity int) { t.list = make([]receiverEntry, 0, capacity) }

// stepStatus records a receiver's position report.
func (c *Core) stepStatus(now Time, frame []byte, from transport.Peer) error {
	s := &c.status
	if err := wire.DecodeStatus(frame, s); err != nil {
		c.stats.Malformed++
		return err
	}
	c.advance(now)
	if s.Session != c.session {
		c.stats.WrongSession++
		return nil
	}
	if s.Contiguous > c.published {
		// A receiver cannot hold whole what was never published whole
		// (wire.DecodeStatus already refuses Delivered > Contiguous): a
		// stale report from another epoch's primary, or a forgery.
		c.stats.StatusBeyondTail++
		return nil
	}
	c.stats.Statuses++
	if s.Flags&wire.StatusStandby != 0 {
		c.queueAck(s.Member, s.Epoch, s.Contiguous)
	}
	t := &c.flow
	e := t.find(s, from)
	if e == nil {
		e = t.add()
	}
	flags := s.Flags
	if flags&(wire.StatusReadOnly|wire.StatusStandby) == 0 && !c.sent(s.Account, s.Instance) {
		// Only a receiver that sends commands may hold the stream back
		// (its resends would fall off the ring); a report naming an
		// account that never sent one is a read-only receiver's at
		// most, or a forgery that would pause every sender.
		flags |= wire.StatusReadOnly
		c.stats.StatusNeverSent++
	}
	e.account, e.instance, e.flags, e.incarnation, e.member, e.peer = s.Account, s.Instance, flags, s.Incarnation, s.Member, from
	e.contiguous = max(e.contiguous, s.Contiguous)
	e.delivered = max(e.delivered, s.Delivered)
	e.heard = c.mono
	c.updateFlowLimit()
	return nil
}

// sent reports whether (a, instance) has a command in the stream (it is in
// the dedupe table).
func (c *Core) sent(a wire.Account, instance uint8) bool {
	if a == 0 {
		return false
	}
	i, _ := c.state.senders.lookup(a, instance)
	return i >= 0
}

// find returns the entry of the receiver that sent s from peer, or nil.
// A named receiver is known by (account, instance, incarnation); an
// anonymous one (a tail) by its transport peer.
func (t *flowTable) find(s *wire.Status, from transport.Peer) *receiverEntry {
	for i := range t.list {
		e := &t.list[i]
		if s.Account != 0 && e.account == s.Account && e.instance == s.Instance && e.incarnation == s.Incarnation ||
			s.Account == 0 && e.account == 0 && e.peer == from {
			return e
		}
	}
	return nil
}

// add returns a fresh entry, forgetting the least recently heard receiver
// when the table is full.
func (t *flowTable) add() *receiverEntry {
	if len(t.list) < cap(t.list) {
		t.list = append(t.list, receiverEntry{})
		return &t.list[len(t.list)-1]
	}
	old := 0
	for i := range t.list {
		if t.list[i].heard < t.list[old].heard {
			old = i
		}
	}
	t.list[old] = receiverEntry{}
	return &t.list[old]
}

// updateFlowLimit recomputes how far the stream may grow: the flow window
// (FlowWindowPercent of RingBytes) past the packet holding the first seq
// the slowest receiver that matters lacks. A receiver whose next seq
// already left the ring cannot be saved by pausing (it must rewind) and
// does not count; neither does one not heard for FlowReceiverTimeout.
//
// Standbys count together, through stable: stable needs only a majority
// of the group, so one standby that stays alive but lags (a failing disk
// under durable) must not stall every sender; the stream waits only when
// the quorum itself is a window behind. A standby's own position only
// shows in Receivers. While some standby was heard within
// FlowReceiverTimeout, stable is a position that matters (a group whose
// standbys all went silent does not hold the stream back, as before).
func (c *Core) updateFlowLimit() {
	t := &c.flow
	t.limitPos, t.slowest, t.updated, t.byStable = 0, 0, c.mono, false
	if c.cfg.FlowWindowPercent == 0 {
		return
	}
	found := false
	for i := range t.list {
		e := &t.list[i]
		if !e.matters() || c.mono-e.heard > int64(c.cfg.FlowReceiverTimeout) {
			continue
		}
		if e.standby() {
			t.byStable = true
			continue
		}
		if e.contiguous >= c.tail {
			continue
		}
		if !found || e.contiguous < t.slowest {
			t.slowest, found = e.contiguous, true
		}
	}
	if t.byStable && c.stable < c.tail && (!found || c.stable < t.slowest) {
		t.slowest, found = c.stable, true
	}
	if !found {
		return
	}
	pos, ok := c.ring.posOf(t.slowest + 1)
	if !ok {
		return
	}
	t.limitPos = pos + uint64(c.cfg.RingBytes)*uint64(c.cfg.FlowWindowPercent)/100
}

// tickFlow lets a receiver that went silent stop holding the stream back
// (a few times per FlowReceiverTimeout, not on every Tick).
func (c *Core) tickFlow() {
	if c.flow.limitPos != 0 && c.mono-c.flow.updated >= int64(c.cfg.FlowReceiverTimeout)/8 {
		c.updateFlowLimit()
	}
}

// flowPaused reports whether the stream is a flow window ahead of the
// slowest receiver that matters: commands wait.
func (c *Core) flowPaused() bool {
	return c.flow.limitPos != 0 && c.ring.tail >= c.flow.limitPos
}

// ReceiverLag is one receiver's position as the sequencer last heard it.
type ReceiverLag struct {
	Account     wire.Account // 0 for an anonymous receiver (a tail)
	Instance    uint8
	Incarnation uint64
	ReadOnly    bool   // never slows the stream
	Standby     bool   // a standby sequencer: slows the stream only through stable
	Member      uint64 // the standby's cluster member id
	Contiguous  uint64 // it holds every seq up to this one
	Delivered   uint64 // and handed this far to its application
	Lag         uint64 // seqs published after Contiguous
	SilentNs    int64  // since its last report
}

// Receivers appends every known receiver's position to dst and returns it
// (for admin and metrics; it allocates when dst is too small).
func (c *Core) Receivers(dst []ReceiverLag) []ReceiverLag {
	for i := range c.flow.list {
		e := &c.flow.list[i]
		lag := uint64(0)
		if c.tail > e.contiguous {
			lag = c.tail - e.contiguous
		}
		dst = append(dst, ReceiverLag{
			Account: e.account, Instance: e.instance, Incarnation: e.incarnation,
			ReadOnly: !e.matters(), Standby: e.standby(), Member: e.member, Contiguous: e.contiguous, Delivered: e.delivered,
			Lag: lag, SilentNs: c.mono - e.heard,
		})
	}
	return dst
}
