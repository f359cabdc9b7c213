package sequencer

import (
	"github.com/seqd/seqd/wire"
)

// sender is the dedupe entry of one (account, instance), part of State:
// the incarnation on record, the last cmdSeq used up, and its latest
// record (for the choice of whom to forget in a full table).
type sender struct {
	account     wire.Account
	instance    uint8
	acct        int32  // index in State.accounts.list
	timers      int32  // centralized timers it holds
	timerRate   uint64 // how often its periodic timers fire together (timerRate)
	incarnation uint64
	lastCmdSeq  uint64
	// hotHot: an instance of a hot-hot account (its last InternalIncarnation
	// said so): its commands are fenced by activation and deduped by id.
	hotHot bool
	// fenced: a command of this incarnation was rejected NotActive
	// (State.Apply). Every later command of it is rejected too, even once
	// the instance is active again: the node learns from the stream that
	// it was passive and resends the rejected ones under a new
	// incarnation, which clears the mark. Without it the incarnation's
	// later commands, sent before its node read of the switch, could be
	// sequenced ahead of the rejected ones, and the account's id
	// high-water mark (accountState.lastID) would then drop those as the
	// partner's copies although nobody sequenced them.
	fenced   bool
	lastSeq  uint64 // seq of its latest record
	lastTime int64  // time of its latest record
}

// senderTable is an open-addressing (linear probing) hash table from
// (account, instance) to an index in list. The list is allocated up front
// (MaxSenders) and entries never move: a forgotten sender's index is
// reused by the one that replaces it. A lookup costs one hash and usually
// one probe and allocates nothing.
type senderTable struct {
	slots []int32 // index+1 into list; 0 = empty
	mask  uint64
	list  []sender
}

func (t *senderTable) init(capacity int) {
	n := 1
	for n < 2*capacity {
		n <<= 1
	}
	t.slots = make([]int32, n)
	t.mask = uint64(n - 1)
	t.list = make([]sender, 0, capacity)
}

func senderHash(a wire.Account, instance uint8) uint64 {
	x := uint64(a) ^ uint64(instance)*0x9E3779B97F4A7C15
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return x
}

// lookup returns the sender's index, or -1 and the empty slot where it
// would go.
func (t *senderTable) lookup(a wire.Account, instance uint8) (int32, uint64) {
	i := senderHash(a, instance) & t.mask
	for {
		s := t.slots[i]
		if s == 0 {
			return -1, i
		}
		e := &t.list[s-1]
		if e.account == a && e.instance == instance {
			return s - 1, i
		}
		i = (i + 1) & t.mask
	}
}

// insert adds a sender at the empty slot lookup returned; the caller
// checks that the list has room.
func (t *senderTable) insert(slot uint64, a wire.Account, instance uint8) int32 {
	t.list = append(t.list, sender{account: a, instance: instance})
	idx := int32(len(t.list) - 1)
	t.slots[slot] = idx + 1
	return idx
}

// reuse gives index idx (unlinked) to a new sender at the empty slot
// lookup returned.
func (t *senderTable) reuse(idx int32, slot uint64, a wire.Account, instance uint8) {
	t.list[idx] = sender{account: a, instance: instance}
	t.slots[slot] = idx + 1
}

// unlink removes index idx from the hash slots (the list entry stays, for
// reuse), shifting later entries of its probe run back so that lookups
// need no tombstones.
func (t *senderTable) unlink(idx int32) {
	e := &t.list[idx]
	_, i := t.lookup(e.account, e.instance)
	for t.slots[i] != idx+1 {
		i = (i + 1) & t.mask
	}
	for {
		j := i
		for {
			j = (j + 1) & t.mask
			s := t.slots[j]
			if s == 0 {
				t.slots[i] = 0
				return
			}
			home := senderHash(t.list[s-1].account, t.list[s-1].instance) & t.mask
			// The entry at j may move to i unless its home lies
			// cyclically in (i, j].
			if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
				t.slots[i] = s
				i = j
				break
			}
		}
	}
}
