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
func (c *Core) checkActivity() {
	timeout := int64(c.cfg.ActiveTimeout)
	st := &c.state
	for ai := range st.accounts.list {
		a := &st.accounts.list[ai]
		if a.active < 0 || c.mono-c.heard(a.active) < timeout {
			continue
		}
		best := int32(-1)
		var bestHeard int64
		for _, idx := range a.instances {
			h := c.heard(idx)
			if idx == a.active || c.mono-h >= timeout {
				continue
			}
			if best < 0 || h > bestHeard {
				best, bestHeard = idx, h
			}
		}
		if best < 0 {
			continue
		}
		old := &st.senders.list[a.active]
		c.in = wire.Internal{Type: wire.InternalNodeDeactivated, Account: old.account, Instance: old.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		nw := &st.senders.list[best]
		c.in = wire.Internal{Type: wire.InternalNodeActivated, Account: nw.account, Instance: nw.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		c.stats.ActivationSwitch++
	}
}
