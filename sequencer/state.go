package sequencer

import (
	"github.com/seqd/seqd/wire"
)

// State is the part of the sequencer that the stream determines: the
// dedupe table (per (account, instance): incarnation and last command
// seq), hot-hot activation (the active instance of each account), the
// centralized timers, and the position (last seq and time applied, the
// epoch). It changes only through Apply, one sequenced record at a time,
// so the primary (which decides a record, emits it, then applies it) and
// a standby or replayer (which applies the records it reads from the
// stream) hold equal States at equal positions: Snapshot bytes are equal.
// That is what lets a new primary rebuild its dedupe table from the stream.
//
// Decisions are not here: which command to accept or reject, when a
// timer is due, when to switch activation. The Core makes them (reading
// the State) and puts them in the stream; Apply only replays their
// effect. The one choice Apply makes itself, which sender to forget when
// a record names a new one and the table is full, is a pure function of
// the State (the sender whose last record is oldest), so every applier
// makes the same one.
//
// A State is not safe for concurrent use.
type State struct {
	maxSenders int
	lastSeq    uint64 // last seq applied
	lastTime   int64  // latest record time applied
	epoch      uint32
	epochStart uint64

	senders  senderTable
	accounts accountTable
	timers   timerTable

	in   wire.Internal // scratch for Apply
	hint int32         // index of the sender touched last: consecutive records are often one sender's
}

// NewState returns an empty State positioned before firstSeq, holding at
// most maxSenders senders. Every member of a sequencer group must use the
// same maxSenders: it decides when Apply forgets a sender (Snapshot
// carries it, and Restore takes it from there).
func NewState(maxSenders int, firstSeq uint64) *State {
	s := &State{}
	s.init(maxSenders, firstSeq)
	return s
}

func (s *State) init(maxSenders int, firstSeq uint64) {
	*s = State{maxSenders: maxSenders, lastSeq: firstSeq - 1}
	s.senders.init(maxSenders)
	s.accounts.init(maxSenders)
	s.timers.init()
}

// LastSeq is the seq of the last record applied.
func (s *State) LastSeq() uint64 { return s.lastSeq }

// LastTime is the latest record time applied.
func (s *State) LastTime() int64 { return s.lastTime }

// Epoch is the epoch of the last InternalEpochStart applied and the seq it
// began at.
func (s *State) Epoch() (epoch uint32, start uint64) { return s.epoch, s.epochStart }

// Senders is the number of senders on record.
func (s *State) Senders() int { return len(s.senders.list) }

// Timers is the number of centralized timers scheduled.
func (s *State) Timers() int { return len(s.timers.heap) }

// Sender reports what the dedupe table holds for (account, instance).
func (s *State) Sender(a wire.Account, instance uint8) (incarnation, lastCmdSeq uint64, ok bool) {
	i, _ := s.senders.lookup(a, instance)
	if i < 0 {
		return 0, 0, false
	}
	e := &s.senders.list[i]
	return e.incarnation, e.lastCmdSeq, true
}

// Active reports the active instance of account a, if any.
func (s *State) Active(a wire.Account) (instance uint8, ok bool) {
	ai, found := s.accounts.index[a]
	if !found || s.accounts.list[ai].active < 0 {
		return 0, false
	}
	return s.senders.list[s.accounts.list[ai].active].instance, true
}

// HotHot reports the last hot-hot command id sequenced for account a
// and whether instance is on record as a hot-hot instance of it.
func (s *State) HotHot(a wire.Account, instance uint8) (lastID uint64, hot bool) {
	if ai, ok := s.accounts.index[a]; ok {
		lastID = s.accounts.list[ai].lastID
	}
	if i, _ := s.senders.lookup(a, instance); i >= 0 {
		hot = s.senders.list[i].hotHot
	}
	return lastID, hot
}

// HotHotPair is one hot-hot account as the State holds it: its active
// instance (-1: none), the last command id sequenced for it, and its
// instances on record.
type HotHotPair struct {
	Account   wire.Account
	Active    int
	LastID    uint64
	Instances []HotHotInstance
}

// HotHotInstance is one instance of a hot-hot account: its incarnation
// and the seq of its latest record.
type HotHotInstance struct {
	Instance    uint8
	Incarnation uint64
	LastSeq     uint64
	// Fenced: a command of this incarnation was rejected NotActive, so
	// every later one is too (State.Apply).
	Fenced bool
}

// HotHotPairs lists the accounts with a hot-hot instance, in table order
// (for operators; it allocates).
func (s *State) HotHotPairs() []HotHotPair {
	var out []HotHotPair
	for ai := range s.accounts.list {
		a := &s.accounts.list[ai]
		p := HotHotPair{Account: a.account, Active: -1, LastID: a.lastID}
		hot := false
		for _, idx := range a.instances {
			e := &s.senders.list[idx]
			hot = hot || e.hotHot
			p.Instances = append(p.Instances, HotHotInstance{Instance: e.instance, Incarnation: e.incarnation, LastSeq: e.lastSeq, Fenced: e.fenced})
		}
		if !hot {
			continue
		}
		if a.active >= 0 {
			p.Active = int(s.senders.list[a.active].instance)
		}
		out = append(out, p)
	}
	return out
}

// Apply replays one sequenced record. r is a whole message: Seq, Time,
// Flags, Account, Instance, CmdSeq and, for an internal record, Payload.
// A fragmented message is applied once (any one of its fragments will
// do, since only an internal payload is read and internal messages are
// never fragmented). Records must come in seq order with no gap
// (ErrApplyGap); an internal record that does not decode returns
// ErrApplyRecord, and one that names a new sender while the table is
// full ErrApplyFull (the primary forgets a sender first). None of them
// changes the State.
//
// Effects, by record:
//   - a command (no FlagInternal): its sender's last command seq becomes
//     CmdSeq;
//   - a command of a hot-hot instance (its incarnation's record said
//     so): its last command seq moves up by one, and CmdSeq, the
//     command's id, raises its account's last id;
//   - InternalIncarnation: the sender's incarnation becomes Value, its
//     last command seq 0, it is hot-hot when Extra's bit 0 is set, and
//     not fenced;
//   - InternalActivate / InternalForcePassive: the requester's command
//     seq (a node's control command) is used up;
//   - InternalTimerSet / InternalTimerCancel (the requester's CmdSeq in
//     the record): the timer is set or cancelled (and the sender's timer
//     rate follows), and the command seq used up;
//   - InternalRejected: the command seq (ID) is used up, except for
//     RejectSenderTableFull, which leaves no entry; RejectNotActive
//     fences the sender's incarnation (sender.fenced);
//   - InternalSenderForgotten: the sender's entry and timers are removed;
//   - InternalNodeActivated / InternalNodeDeactivated: the account's
//     active instance;
//   - InternalTimer: a one-shot timer is removed, a periodic one moves to
//     its next period after the record's time (nextFiring);
//   - InternalEpochStart: the epoch and its first seq;
//   - InternalStaleIncarnation: nothing (it tells a node, see
//     Core.tellStale).
//
// Each record that names a sender it has no entry for creates one
// (SenderForgotten, NodeDeactivated, Timer and RejectSenderTableFull
// excepted). Every sender's latest record is kept: the least recently
// active one is whom the primary forgets in a full table.
func (s *State) Apply(r *wire.Record) error {
	if r.Seq != s.lastSeq+1 {
		return ErrApplyGap
	}
	if r.Flags&wire.FlagInternal == 0 {
		i := s.touch(r.Account, r.Instance, r.Seq, r.Time)
		if i < 0 {
			return ErrApplyFull
		}
		e := &s.senders.list[i]
		if e.hotHot {
			// The record carries the command's id; its seq is the next
			// one (the primary takes a sender's commands only in order).
			e.lastCmdSeq++
			a := &s.accounts.list[e.acct]
			a.lastID = max(a.lastID, r.CmdSeq)
		} else {
			e.lastCmdSeq = r.CmdSeq
		}
		s.advance(r)
		return nil
	}
	in := &s.in
	if r.Flags&wire.FlagFragment != 0 {
		return ErrApplyRecord
	}
	if err := wire.DecodeInternal(r.Payload, in); err != nil {
		return ErrApplyRecord
	}
	// The records that name a sender touch it first, before any other
	// change, so ErrApplyFull leaves the State as it was.
	i := int32(0)
	switch in.Type {
	case wire.InternalIncarnation, wire.InternalTimerSet, wire.InternalTimerCancel, wire.InternalNodeActivated:
		i = s.touch(in.Account, in.Instance, r.Seq, r.Time)
	case wire.InternalRejected:
		if wire.RejectReason(in.Value) != wire.RejectSenderTableFull {
			i = s.touch(in.Account, in.Instance, r.Seq, r.Time)
		}
	case wire.InternalActivate, wire.InternalForcePassive:
		// The record names its requester (a node's control command), or
		// no sender (an operator's).
		if r.CmdSeq != 0 {
			i = s.touch(r.Account, r.Instance, r.Seq, r.Time)
		}
	}
	if i < 0 {
		return ErrApplyFull
	}
	switch in.Type {
	case wire.InternalEpochStart:
		s.epoch, s.epochStart = in.Epoch, in.Value
	case wire.InternalIncarnation:
		e := &s.senders.list[i]
		e.incarnation = in.Value
		e.lastCmdSeq = 0
		e.hotHot = in.Extra&1 != 0
		e.fenced = false
	case wire.InternalActivate, wire.InternalForcePassive:
		if r.CmdSeq != 0 {
			s.senders.list[i].lastCmdSeq = r.CmdSeq
		}
	case wire.InternalTimerSet, wire.InternalTimerCancel:
		e := &s.senders.list[i]
		e.lastCmdSeq = r.CmdSeq
		k := timerKey{account: in.Account, instance: in.Instance, id: in.ID}
		e.timerRate -= s.timers.rateOf(k) // replaced or cancelled
		if in.Type == wire.InternalTimerSet {
			if s.timers.set(k, int64(in.Value), in.Extra) {
				e.timers++
			}
			e.timerRate += timerRate(in.Extra)
		} else if s.timers.cancel(k) {
			e.timers--
		}
	case wire.InternalRejected:
		switch wire.RejectReason(in.Value) {
		case wire.RejectSenderTableFull:
		case wire.RejectNotActive:
			e := &s.senders.list[i]
			e.lastCmdSeq = in.ID
			e.fenced = e.hotHot // only a hot-hot command is rejected so
		default:
			s.senders.list[i].lastCmdSeq = in.ID
		}
	case wire.InternalSenderForgotten:
		if i, _ := s.senders.lookup(in.Account, in.Instance); i >= 0 {
			s.forget(i)
		}
	case wire.InternalNodeActivated:
		s.accounts.list[s.senders.list[i].acct].active = i
	case wire.InternalNodeDeactivated:
		if i, _ := s.senders.lookup(in.Account, in.Instance); i >= 0 {
			if a := &s.accounts.list[s.senders.list[i].acct]; a.active == i {
				a.active = -1
			}
		}
	case wire.InternalTimer:
		k := timerKey{account: in.Account, instance: in.Instance, id: in.ID}
		rate := s.timers.rateOf(k)
		if s.timers.fired(k, r.Time) {
			if i, _ := s.senders.lookup(in.Account, in.Instance); i >= 0 {
				s.senders.list[i].timers--
				s.senders.list[i].timerRate -= rate
			}
		}
	}
	s.advance(r)
	return nil
}

func (s *State) advance(r *wire.Record) {
	s.lastSeq = r.Seq
	if r.Time > s.lastTime {
		s.lastTime = r.Time
	}
}

// touch returns the index of the sender (a, instance), creating it if
// the table has room (-1 if not, and nothing changes), and records seq
// and t as its latest activity.
func (s *State) touch(a wire.Account, instance uint8, seq uint64, t int64) int32 {
	i := s.hint
	if int(i) >= len(s.senders.list) || s.senders.list[i].account != a || s.senders.list[i].instance != instance {
		var slot uint64
		if i, slot = s.senders.lookup(a, instance); i < 0 {
			if len(s.senders.list) == s.maxSenders {
				return -1
			}
			i = s.senders.insert(slot, a, instance)
			s.accounts.add(s, i)
		}
		s.hint = i
	}
	e := &s.senders.list[i]
	e.lastSeq, e.lastTime = seq, t
	return i
}

// canApply reports whether an internal record with payload m would apply:
// a known type, and room for the sender it names if it creates one.
func (s *State) canApply(m *wire.Internal) bool {
	if m.Type < wire.InternalSessionStart || m.Type > wire.InternalActivate {
		return false
	}
	switch m.Type {
	case wire.InternalIncarnation, wire.InternalTimerSet, wire.InternalTimerCancel, wire.InternalNodeActivated, wire.InternalRejected:
		if m.Type == wire.InternalRejected && wire.RejectReason(m.Value) == wire.RejectSenderTableFull {
			return true
		}
		if len(s.senders.list) == s.maxSenders {
			i, _ := s.senders.lookup(m.Account, m.Instance)
			return i >= 0
		}
	}
	return true
}

// victim is the sender a full table forgets for a new one: the one whose
// last record is oldest (least recently active). It costs a scan of the
// table, once per new sender in a full table.
func (s *State) victim() int32 {
	best := int32(-1)
	for i := range s.senders.list {
		if best < 0 || s.senders.list[i].lastSeq < s.senders.list[best].lastSeq {
			best = int32(i)
		}
	}
	return best
}

// forget removes sender i from the dedupe table, its account and the
// timers. The last entry of the list moves into its index, so the list
// has no holes.
func (s *State) forget(i int32) {
	e := &s.senders.list[i]
	if e.timers > 0 {
		s.timers.cancelSender(e.account, e.instance)
		e.timers = 0
	}
	s.accounts.remove(s, i)
	s.senders.unlink(i)
	last := int32(len(s.senders.list) - 1)
	if i != last {
		m := s.senders.list[last]
		_, slot := s.senders.lookup(m.account, m.instance)
		s.senders.slots[slot] = i + 1
		s.senders.list[i] = m
		a := &s.accounts.list[m.acct]
		for k, idx := range a.instances {
			if idx == last {
				a.instances[k] = i
			}
		}
		if a.active == last {
			a.active = i
		}
	}
	s.senders.list[last] = sender{}
	s.senders.list = s.senders.list[:last]
}
