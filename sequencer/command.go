package sequencer

import (
	"time"

	"github.com/seqd/seqd/wire"
)

// liveSender is what the primary knows of a sender beyond the stream: when
// it last heard a valid frame from it (duplicates and resends included),
// which drives hot-hot activation. live[i] belongs to State sender i only
// while its key matches; after a failover (or once the entry was reused)
// the sender's latest record time stands in.
type liveSender struct {
	key   senderKey
	heard int64
	// The last InternalStaleIncarnation told to this sender: for which
	// stale incarnation, and when (mono).
	staleInc uint64
	staleAt  int64
}

func (c *Core) hear(idx int32, k senderKey) { c.live[idx] = liveSender{key: k, heard: c.mono} }

// heard is the mono time sender idx was last heard from. A sender the
// primary has not heard from itself (it took over, or restored a State)
// counts as heard when first asked, so ActiveTimeout runs from there.
func (c *Core) heard(idx int32) int64 {
	l, e := &c.live[idx], &c.state.senders.list[idx]
	if l.key.account != e.account || l.key.instance != e.instance {
		*l = liveSender{key: senderKey{account: e.account, instance: e.instance}, heard: c.mono}
	}
	return l.heard
}

// stepCommand decodes a command frame and decides, command by command,
// what goes into the stream: each command that is next for its sender is
// either sequenced or rejected (an InternalRejected record that uses up
// its command seq), so one bad command never holds back the others.
// Duplicates and commands ahead of the next one are dropped and counted
// (the node resends).
func (c *Core) stepCommand(now Time, frame []byte) error {
	p := &c.cmd
	if err := wire.DecodeCommand(frame, p); err != nil {
		c.stats.Malformed++
		return err
	}
	if p.Session != 0 && p.Session != c.session {
		c.stats.WrongSession++
		return nil
	}
	if c.flowPaused() {
		// The slowest receiver that matters is a flow window behind: the
		// node resends this frame after its backoff.
		c.stats.FlowPaused++
		return nil
	}
	st := &c.state
	k := senderKey{account: p.Account, instance: p.Instance}
	idx, _ := st.senders.lookup(p.Account, p.Instance)
	if idx >= 0 && p.Incarnation < st.senders.list[idx].incarnation {
		c.stats.StaleFrames++
		c.tellStale(now, idx, k, p.Incarnation)
		return nil
	}
	c.advance(now)
	hot := p.HotHot
	expected := uint64(1)
	if idx >= 0 {
		c.hear(idx, k)
		if p.Incarnation > st.senders.list[idx].incarnation {
			// A restarted node: the reset goes into the stream so that a
			// new primary rebuilding the table from the stream agrees.
			c.asm.drop(k)
			c.in = wire.Internal{Type: wire.InternalIncarnation, Account: k.account, Instance: k.instance, Value: p.Incarnation, Extra: hotExtra(hot)}
			c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
			if hot {
				c.restarted(idx)
			}
		} else if hot != st.senders.list[idx].hotHot {
			// One incarnation is hot-hot or not for its whole life.
			c.stats.HotHotMismatch++
			return nil
		}
		expected = st.senders.list[idx].lastCmdSeq + 1
	}
	if hot && p.Count == 0 {
		// A hot-hot instance's heartbeat: heard (above), and put on
		// record if it is new, so that it can take over.
		if idx < 0 && p.Incarnation > 0 {
			c.admit(k, p.Incarnation, true)
		}
		return nil
	}
	full := false // an unknown sender that the table has no room for
	cmd := &c.c
	for p.Next(cmd) {
		switch {
		case cmd.CmdSeq < expected:
			c.stats.Duplicates++
			continue
		case full:
			c.reject(k, p.Incarnation, cmd.CmdSeq, wire.RejectSenderTableFull)
			continue
		case cmd.CmdSeq > expected:
			// Ahead of the next one: an earlier frame was lost and
			// will be resent. For an unknown sender this is also a
			// forgotten one that did not start a new incarnation
			// (InternalSenderForgotten told it to): a resend cannot be
			// told from a new command, so nothing is taken.
			c.stats.OutOfOrder++
			continue
		}
		reason := c.checkCommand(cmd, idx)
		payload, whole := cmd.Payload, true
		if reason == 0 && cmd.Flags&wire.CmdFragment != 0 {
			if payload, reason, whole = c.addFragment(k, p.Incarnation, cmd); reason == 0 && !whole {
				continue
			}
		}
		if idx < 0 {
			if idx = c.admit(k, p.Incarnation, hot); idx < 0 {
				c.asm.drop(k)
				full = true
				c.reject(k, p.Incarnation, cmd.CmdSeq, wire.RejectSenderTableFull)
				continue
			}
		} else if st.accounts.list[st.senders.list[idx].acct].active < 0 {
			// Its account's active instance was forgotten.
			c.activate(k)
		}
		if reason == 0 && hot {
			reason = c.checkHotHot(idx, cmd)
		}
		switch {
		case reason != 0:
			c.reject(k, p.Incarnation, cmd.CmdSeq, reason)
		case cmd.Flags&wire.CmdControl != 0:
			c.controlCommand(k, p.Incarnation, cmd.CmdSeq, payload)
		case cmd.Flags&wire.CmdTimer != 0:
			c.sequenceTimer(k, cmd.CmdSeq)
		default:
			var flags uint8
			if cmd.Flags&wire.CmdOOB != 0 {
				flags = wire.FlagOOB
			}
			// A hot-hot command's record carries its id: the partner
			// instance matches its shadow copy by it.
			id := cmd.CmdSeq
			if hot {
				id = cmd.ID
			}
			c.appendMessage(flags, k.account, k.instance, id, payload)
			c.stats.Commands++
			if cmd.Flags&wire.CmdFragment != 0 {
				c.asm.drop(k)
			}
		}
		expected++
	}
	return nil
}

// staleTellInterval: a sender whose frames keep coming with a stale
// incarnation is told again at most this often (its node resends; the
// record is in the stream, so a node that heard it needs no repeat).
const staleTellInterval = int64(100 * time.Millisecond)

// tellStale answers a frame of sender idx whose incarnation inc is older
// than the one on record with InternalStaleIncarnation, so that its node
// (a restart whose wall-clock incarnation went back, joined live) takes a
// newer one instead of resending into silence forever. Frames of an
// incarnation really superseded (an old process still running, a resend
// delayed in the network) get the same answer, which that process takes
// as superseded. At most one record per sender per staleTellInterval
// and stale incarnation, so stale frames cannot flood the stream.
func (c *Core) tellStale(now Time, idx int32, k senderKey, inc uint64) {
	c.advance(now)
	c.heard(idx) // brings live[idx] to this sender (without hearing it)
	l := &c.live[idx]
	if l.staleInc == inc && l.staleAt != 0 && c.mono-l.staleAt < staleTellInterval {
		return
	}
	l.staleInc, l.staleAt = inc, c.mono
	c.in = wire.Internal{Type: wire.InternalStaleIncarnation, Account: k.account, Instance: k.instance,
		Value: c.state.senders.list[idx].incarnation, Extra: int64(inc)}
	c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	c.stats.StaleTold++
}

// checkCommand returns why the sequencer must refuse cmd, or 0: larger
// than MaxMessageBytes (whole, or the Total of a fragment), or a timer
// request that is malformed, fragmented, too fast or over the cap.
func (c *Core) checkCommand(cmd *wire.Command, idx int32) wire.RejectReason {
	if cmd.Total > uint32(c.cfg.MaxMessageBytes) {
		return wire.RejectTooLarge
	}
	if cmd.Flags&wire.CmdTimer != 0 {
		return c.checkTimer(cmd, idx)
	}
	return 0
}

// admit makes room for a new sender whose first record is about to be
// emitted, and returns the index it will get, or -1 when the table is
// full of senders active within SenderIdleTimeout. In a full table it
// forgets the least recently active sender (InternalSenderForgotten,
// applied like any record, so a standby forgets the same one). The
// records it may emit next (its account's activation, its incarnation)
// create the entry; when neither is due, the command's own record does.
func (c *Core) admit(k senderKey, incarnation uint64, hot bool) int32 {
	st := &c.state
	if len(st.senders.list) == st.maxSenders {
		v := st.victim()
		e := &st.senders.list[v]
		if c.now-e.lastTime < int64(c.cfg.SenderIdleTimeout) {
			return -1
		}
		// The last entry moves into v's index (State.forget): so does
		// what the primary heard from it.
		c.live[v] = c.live[len(st.senders.list)-1]
		c.in = wire.Internal{Type: wire.InternalSenderForgotten, Account: e.account, Instance: e.instance,
			ID: e.lastCmdSeq, Extra: int64(e.incarnation)}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		c.stats.SendersForgotten++
	}
	idx := int32(len(st.senders.list))
	if ai, ok := st.accounts.index[k.account]; !ok || st.accounts.list[ai].active < 0 {
		c.activate(k)
	}
	if incarnation > 0 {
		c.in = wire.Internal{Type: wire.InternalIncarnation, Account: k.account, Instance: k.instance, Value: incarnation, Extra: hotExtra(hot)}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	}
	c.live[idx] = liveSender{key: k, heard: c.mono}
	return idx
}

// hotExtra is the Extra of an InternalIncarnation record: bit 0 says the
// incarnation is a hot-hot instance's.
func hotExtra(hot bool) int64 {
	if hot {
		return 1
	}
	return 0
}

// checkHotHot fences and dedupes command cmd of hot-hot sender idx: only
// the account's active instance is sequenced (and not an incarnation of
// it that was fenced since it last became one), and an id already
// sequenced for the account (the partner's copy) is not sequenced again.
// Either way the command's seq is used up in the stream (a rejection
// record), so a standby's table agrees and the sender's later commands
// are not held.
func (c *Core) checkHotHot(idx int32, cmd *wire.Command) wire.RejectReason {
	st := &c.state
	e := &st.senders.list[idx]
	a := &st.accounts.list[e.acct]
	switch {
	case cmd.Flags&wire.CmdControl != 0:
		return 0 // a request about activation: any instance may ask
	case cmd.Flags&wire.CmdTimer != 0:
		// Timer keys name the instance: the partner's would differ.
		return wire.RejectTimerRequest
	case a.active != idx || e.fenced:
		// Not active, or active again but with an incarnation that was
		// fenced (sender.fenced): an account's ids enter the stream in
		// order only if no command of an incarnation is sequenced after
		// one of it was rejected.
		return wire.RejectNotActive
	case cmd.ID <= a.lastID:
		return wire.RejectDuplicateID
	}
	return 0
}

// controlCommand carries out a node's control request (CmdControl) or
// rejects it (RejectControl).
func (c *Core) controlCommand(k senderKey, incarnation, cmdSeq uint64, payload []byte) {
	var r wire.ControlRequest
	if wire.DecodeControl(payload, &r) != nil {
		c.reject(k, incarnation, cmdSeq, wire.RejectControl)
		return
	}
	if _, err := c.control(r.Op, r.Account, r.Instance, k, cmdSeq); err != nil {
		c.reject(k, incarnation, cmdSeq, wire.RejectControl)
	}
}

// activate emits InternalNodeActivated for k: the first instance of an
// account heard from (or the first after its active one was forgotten)
// becomes active, announced before its first message.
func (c *Core) activate(k senderKey) {
	c.in = wire.Internal{Type: wire.InternalNodeActivated, Account: k.account, Instance: k.instance}
	c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
}

// reject emits InternalRejected for command cmdSeq of k: the node's
// error for that command. The record carries the requester's account,
// instance and command seq like a sequenced command, and uses the
// command seq up (State.Apply), except when the sender has no entry
// (RejectSenderTableFull).
func (c *Core) reject(k senderKey, incarnation, cmdSeq uint64, reason wire.RejectReason) {
	c.in = wire.Internal{Type: wire.InternalRejected, Account: k.account, Instance: k.instance, ID: cmdSeq,
		Value: uint64(reason), Extra: int64(incarnation)}
	c.emitInternal(wire.FlagInternal, k.account, k.instance, cmdSeq)
	c.stats.Rejected++
	switch reason {
	case wire.RejectTooLarge:
		c.stats.RejectedTooLarge++
	case wire.RejectSenderTableFull:
		c.stats.RejectedSenderTableFull++
	case wire.RejectReassemblyFull:
		c.stats.RejectedReassemblyFull++
	case wire.RejectTimerCap:
		c.stats.RejectedTimerCap++
	case wire.RejectTimerRequest:
		c.stats.RejectedTimerRequest++
	case wire.RejectFragmentedTimer:
		c.stats.RejectedFragmentedTimer++
	case wire.RejectTimerRate:
		c.stats.RejectedTimerRate++
	case wire.RejectNotActive:
		c.stats.RejectedNotActive++
	case wire.RejectDuplicateID:
		c.stats.RejectedDuplicateID++
	}
}

// addFragment adds a fragment of the sender's next command to its
// reassembly. It returns the whole command once every byte is held, or
// RejectReassemblyFull when the bytes it brings do not fit the budget
// even after dropping the reassemblies silent for ReassemblyTimeout. The
// budget is charged by the bytes that arrived, never by the total a
// fragment declares: four 100-byte datagrams declaring 16 MiB each
// pinned 64 MiB for ReassemblyTimeout. A fragment far beyond the bytes
// held is dropped and counted (AheadFragments); the node resends it.
func (c *Core) addFragment(k senderKey, incarnation uint64, cmd *wire.Command) ([]byte, wire.RejectReason, bool) {
	r := c.asm.get(k)
	if r != nil && (r.incarnation != incarnation || r.asm.cmdSeq != cmd.CmdSeq) {
		c.asm.drop(k)
		r = nil
	}
	if r == nil {
		r = c.asm.open(k, incarnation, cmd.CmdSeq, cmd.Total, c.mono)
	} else if r.asm.total != cmd.Total {
		c.stats.BadFragments++
		return nil, 0, false
	}
	r.touched = c.mono
	grow, near := r.asm.grows(cmd.Offset, cmd.Payload)
	if !near {
		c.stats.AheadFragments++
		return nil, 0, false
	}
	if grow > 0 {
		if c.asm.reserved+grow > c.cfg.MaxReassemblyBytes {
			c.expireReassemblies() // r was touched now: it stays
			if c.asm.reserved+grow > c.cfg.MaxReassemblyBytes {
				c.asm.drop(k)
				return nil, wire.RejectReassemblyFull, false
			}
		}
		r.reserved += grow
		c.asm.reserved += grow
	}
	c.stats.Fragments++
	if !r.asm.add(cmd.Offset, cmd.Payload) {
		return nil, 0, false
	}
	return r.asm.buf[:r.asm.total], 0, true
}

// expireReassemblies drops the reassemblies silent for ReassemblyTimeout.
func (c *Core) expireReassemblies() {
	c.stats.ReassembliesExpired += uint64(c.asm.expire(c.mono - int64(c.cfg.ReassemblyTimeout)))
	c.asmExpireAt = c.mono + int64(c.cfg.ReassemblyTimeout)/4
}
