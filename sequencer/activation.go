package sequencer

import "github.com/seqd/seqd/wire"

// accountTable tracks hot-hot activation, part of State: per account, the
// active instance and the instances on record. It changes only when a
// sender appears or is forgotten and when activation switches, never per
// message.
type accountTable struct {
	index map[wire.Account]int32
	list  []accountState
}

type accountState struct {
	account   wire.Account
	active    int32   // sender index of the active instance; -1: none
	instances []int32 // sender indexes of its instances on record
	// lastID is the highest hot-hot command id sequenced for the account:
	// a command id at or below it is the partner's copy (RejectDuplicateID).
	lastID uint64
}

func (t *accountTable) init(capacity int) {
	t.index = make(map[wire.Account]int32)
	t.list = make([]accountState, 0, min(capacity, 1024))
}

// add registers sender i under its account (new accounts start with no
// active instance: InternalNodeActivated sets it).
func (t *accountTable) add(s *State, i int32) {
	e := &s.senders.list[i]
	ai, ok := t.index[e.account]
	if !ok {
		t.list = append(t.list, accountState{account: e.account, active: -1})
		ai = int32(len(t.list) - 1)
		t.index[e.account] = ai
	}
	e.acct = ai
	t.list[ai].instances = append(t.list[ai].instances, i)
}

// remove takes sender i out of its account, and the account out of the
// table when it was the last instance (the last account moves into its
// place).
func (t *accountTable) remove(s *State, i int32) {
	ai := s.senders.list[i].acct
	a := &t.list[ai]
	for k, idx := range a.instances {
		if idx == i {
			a.instances = append(a.instances[:k], a.instances[k+1:]...)
			break
		}
	}
	if a.active == i {
		a.active = -1
	}
	if len(a.instances) > 0 {
		return
	}
	delete(t.index, a.account)
	last := int32(len(t.list) - 1)
	if ai != last {
		t.list[ai] = t.list[last]
		t.index[t.list[ai].account] = ai
		for _, idx := range t.list[ai].instances {
			s.senders.list[idx].acct = ai
		}
	}
	t.list[last] = accountState{}
	t.list = t.list[:last]
}

// checkActivity switches every account whose active instance has been
// silent for ActiveTimeout to the most recently heard other instance, if
// that one was heard within ActiveTimeout. It decides; the records it
// emits make the switch (State.Apply).
//
// Silence counts only while the core runs. When the last check is a
// whole ActiveTimeout ago (the process was stopped or starved, the host
// suspended: the shells tick at least every ActiveTimeout/8 otherwise),
// the frames of that span are still queued unread, and the first one
// read after it may well be the passive's: a switch then would fence a
// healthy active. The timeout restarts instead, as after a failover.
func (c *Core) checkActivity() {
	timeout := int64(c.cfg.ActiveTimeout)
	st := &c.state
	if c.activitySet && c.mono-c.activityAt > timeout {
		c.restartActivity()
	}
	c.activityAt, c.activitySet = c.mono, true
	for ai := range st.accounts.list {
		a := &st.accounts.list[ai]
		if a.active < 0 || c.mono-c.heard(a.active) < timeout {
			continue
		}
		best := c.livePartner(int32(ai), a.active)
		if best < 0 {
			continue
		}
		c.switchActive(a.active, best)
		c.stats.ActivationSwitch++
	}
}

// restartActivity counts every instance of a hot-hot account as heard
// now: ActiveTimeout runs afresh from this reading.
func (c *Core) restartActivity() {
	st := &c.state
	for ai := range st.accounts.list {
		for _, idx := range st.accounts.list[ai].instances {
			c.heard(idx) // a stale live entry takes its key first
			c.live[idx].heard = c.mono
		}
	}
	c.stats.ActivityRestarts++
}

// livePartner is the instance of account ai other than not heard most
// recently within ActiveTimeout (any heard one when ActiveTimeout is 0),
// or -1.
func (c *Core) livePartner(ai, not int32) int32 {
	timeout := int64(c.cfg.ActiveTimeout)
	best := int32(-1)
	var bestHeard int64
	for _, idx := range c.state.accounts.list[ai].instances {
		h := c.heard(idx)
		if idx == not || timeout > 0 && c.mono-h >= timeout {
			continue
		}
		if best < 0 || h > bestHeard {
			best, bestHeard = idx, h
		}
	}
	return best
}

// switchActive emits the pair of records that moves activation from
// sender old (-1: none) to sender nw.
func (c *Core) switchActive(old, nw int32) {
	st := &c.state
	if old >= 0 {
		o := &st.senders.list[old]
		c.in = wire.Internal{Type: wire.InternalNodeDeactivated, Account: o.account, Instance: o.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	}
	n := &st.senders.list[nw]
	c.in = wire.Internal{Type: wire.InternalNodeActivated, Account: n.account, Instance: n.instance}
	c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
}

// Activate makes instance of account a its active instance, in the
// stream: InternalActivate (the request, naming requester, or no sender
// for an operator), then the NodeDeactivated/NodeActivated pair. The
// instance must be on record (it sent or heartbeated); an instance
// already active changes nothing. It returns the seq of the activation.
func (c *Core) Activate(now Time, a wire.Account, instance uint8) (uint64, error) {
	c.advance(now)
	return c.control(wire.ControlActivate, a, instance, senderKey{}, 0)
}

// ForcePassive makes instance of account a passive, in the stream: its
// live partner (heard within ActiveTimeout) becomes active. It fails
// with ErrNoPartner when there is none (the account would have no active
// instance), and ErrNotActive when the instance is not the active one.
func (c *Core) ForcePassive(now Time, a wire.Account, instance uint8) (uint64, error) {
	c.advance(now)
	return c.control(wire.ControlForcePassive, a, instance, senderKey{}, 0)
}

// control carries out an activation change asked by an operator (from
// zero) or by command cmdSeq of sender from.
func (c *Core) control(op uint8, a wire.Account, instance uint8, from senderKey, cmdSeq uint64) (uint64, error) {
	st := &c.state
	idx, _ := st.senders.lookup(a, instance)
	if idx < 0 {
		return 0, ErrUnknownInstance
	}
	acct := &st.accounts.list[st.senders.list[idx].acct]
	old := acct.active
	var nw int32
	typ := wire.InternalActivate
	if op == wire.ControlActivate {
		nw = idx
	} else {
		typ = wire.InternalForcePassive
		if old != idx {
			return 0, ErrNotActive
		}
		if nw = c.livePartner(st.senders.list[idx].acct, idx); nw < 0 {
			return 0, ErrNoPartner
		}
	}
	flags := wire.FlagInternal
	if cmdSeq == 0 {
		flags |= wire.FlagSeqGen
	}
	c.in = wire.Internal{Type: typ, Account: a, Instance: instance}
	seq := c.emitInternal(flags, from.account, from.instance, cmdSeq)
	if old == nw {
		return seq, nil
	}
	c.switchActive(old, nw)
	return c.nextSeq - 1, nil
}

// restarted handles a new incarnation of sender idx of a hot-hot account
// (its InternalIncarnation just emitted): a restarted active instance lost
// what it had in flight, so its live partner takes over; with none, the
// activation is announced again so that the new process learns it is
// active from the live stream.
func (c *Core) restarted(idx int32) {
	st := &c.state
	ai := st.senders.list[idx].acct
	if st.accounts.list[ai].active != idx {
		return
	}
	if nw := c.livePartner(ai, idx); nw >= 0 {
		c.switchActive(idx, nw)
		c.stats.ActivationSwitch++
		return
	}
	c.switchActive(-1, idx)
}
