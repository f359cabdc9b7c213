package cluster

import (
	"fmt"
	"sync"

	"github.com/seqd/seqd/sequencer"
)

// writtenStore is a primary's history that can say what it wrote (the
// standby's store handed over by Takeover: standby's lockedStore): it
// hands the waiting frames to the operating system and returns the
// highest contiguous seq written, as a standby's ack counts it.
type writtenStore interface {
	Written() uint64
}

// primarySelf is a primary's own copy of its epoch, as its stable and its
// seal answer count it (DESIGN.md, "Any majority of the group serves"):
// only what its store wrote, so that after a restart the store still
// holds everything the primary counted, and its seal answer counts like
// a standby's (issue 14 items 2 and 11). A primary deposed from Raft but
// still running answers a seal of its epoch from here (before, it
// refused every seal, errNotFollowing, and with a standby down the group
// could not seal until it came back: the "election gap"); once sealed,
// it counts no more than it answered, as a sealed standby acks no more.
//
// position runs on the sequencing goroutine, seal on a peer server's:
// mu orders them, so no turn counts past an answer given.
type primarySelf struct {
	epoch uint32
	store writtenStore // nil: the history cannot say (test twins)

	mu     sync.Mutex
	sealed uint32 // the newest epoch sealed (0: none)
	frozen uint64 // what the seal answered
}

func newPrimarySelf(epoch uint32, hist sequencer.RetransmitStore) *primarySelf {
	p := &primarySelf{epoch: epoch}
	if w, ok := hist.(writtenStore); ok {
		p.store = w
	}
	return p
}

// position is what the primary counts toward stable, given that it
// published up to published: what its store wrote (never above
// published), frozen at a seal's answer. A history that cannot say what
// it wrote (a test twin) counts what was published.
func (p *primarySelf) position(published uint64) uint64 {
	if p == nil {
		return published
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sealed >= p.epoch {
		return min(p.frozen, published)
	}
	if p.store == nil {
		return published
	}
	return min(p.store.Written(), published)
}

// seal seals the primary's epoch (or a later one) and returns what its
// store wrote of it; a seal of an earlier epoch is refused, as a standby
// sealed for a later one refuses it.
func (p *primarySelf) seal(epoch uint32, published uint64) (uint64, error) {
	if epoch < p.epoch {
		return 0, fmt.Errorf("%w: seal of epoch %d, this member sequences epoch %d", ErrSealRefused, epoch, p.epoch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sealed < p.epoch {
		p.frozen = published
		if p.store != nil {
			p.frozen = min(p.store.Written(), published)
		}
	}
	p.sealed = max(p.sealed, epoch)
	return p.frozen, nil
}
