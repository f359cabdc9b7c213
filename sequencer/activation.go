package sequencer

import "github.com/seqd/seqd/wire"

// accountTable tracks hot-hot activation: per account, which instance is
// active and which instances exist. It changes only when a new sender
// appears or activation switches, never per message.
type accountTable struct {
	index map[wire.Account]int32
	list  []accountState
}

type accountState struct {
	account   wire.Account
	active    int32   // sender index of the active instance
	instances []int32 // sender indexes of every instance heard from
}

func (t *accountTable) init(capacity int) {
	t.index = make(map[wire.Account]int32)
	t.list = make([]accountState, 0, min(capacity, 1024))
}

// addInstance registers a new sender; the first instance of an account
// becomes active, announced before its first message.
func (t *accountTable) addInstance(c *Core, s *sender, idx int32) {
	ai, ok := t.index[s.account]
	if !ok {
		t.list = append(t.list, accountState{account: s.account, active: idx})
		ai = int32(len(t.list) - 1)
		t.index[s.account] = ai
		c.in = wire.Internal{Type: wire.InternalNodeActivated, Account: s.account, Instance: s.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	}
	s.acct = ai
	t.list[ai].instances = append(t.list[ai].instances, idx)
}

// checkActivity switches every account whose active instance has been
// silent for ActiveTimeout to the most recently heard other instance, if
// that one was heard within ActiveTimeout.
func (c *Core) checkActivity() {
	timeout := int64(c.cfg.ActiveTimeout)
	for ai := range c.accounts.list {
		a := &c.accounts.list[ai]
		old := &c.senders.list[a.active]
		if c.mono-old.lastHeard < timeout {
			continue
		}
		best := int32(-1)
		for _, idx := range a.instances {
			s := &c.senders.list[idx]
			if idx == a.active || c.mono-s.lastHeard >= timeout {
				continue
			}
			if best < 0 || s.lastHeard > c.senders.list[best].lastHeard {
				best = idx
			}
		}
		if best < 0 {
			continue
		}
		c.in = wire.Internal{Type: wire.InternalNodeDeactivated, Account: old.account, Instance: old.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		nw := &c.senders.list[best]
		c.in = wire.Internal{Type: wire.InternalNodeActivated, Account: nw.account, Instance: nw.instance}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		a.active = best
		c.stats.ActivationSwitch++
	}
}
