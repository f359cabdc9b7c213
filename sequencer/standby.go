package sequencer

// Standby acks (DESIGN.md, "Stability and failover"): a standby sequencer
// reports the highest seq it holds with no gap in a wire.Status flagged
// wire.StatusStandby, naming itself by its cluster member id. The Core
// does not decide what they mean: which members count, in which epoch, is
// the cluster's quorum, outside this package. It queues them for its shell,
// which drains them once per loop iteration (TakeStandbyAcks), computes
// the quorum's stable seq and hands it back with SetStable, so that stable
// advances within one round trip of a standby's ack.

// StandbyAck is one standby's ack: member Member holds every seq up to
// Contiguous, as a follower of epoch Epoch.
type StandbyAck struct {
	Member     uint64
	Epoch      uint32
	Contiguous uint64
}

// maxPendingAcks bounds the acks queued between two drains. Acks of one
// (member, epoch) are merged, so only more distinct members than this
// (a flood of forged ids) drop acks, counted in Stats.StandbyAcksDropped.
const maxPendingAcks = 64

// queueAck queues a standby's ack, merging it with a pending one of the
// same member and epoch. It allocates nothing (the queue is allocated in
// build).
func (c *Core) queueAck(member uint64, epoch uint32, contiguous uint64) {
	c.stats.StandbyAcks++
	for i := range c.acks {
		if a := &c.acks[i]; a.Member == member && a.Epoch == epoch {
			a.Contiguous = max(a.Contiguous, contiguous)
			return
		}
	}
	if len(c.acks) == cap(c.acks) {
		c.stats.StandbyAcksDropped++
		return
	}
	c.acks = append(c.acks, StandbyAck{Member: member, Epoch: epoch, Contiguous: contiguous})
}

// TakeStandbyAcks appends the standby acks received since the last call
// to dst, in arrival order (one per member and epoch, the highest seq),
// forgets them and returns dst. It allocates nothing when dst has room
// for maxPendingAcks (64) acks.
func (c *Core) TakeStandbyAcks(dst []StandbyAck) []StandbyAck {
	dst = append(dst, c.acks...)
	c.acks = c.acks[:0]
	return dst
}

// PendingStandbyAcks reports whether acks wait for TakeStandbyAcks.
func (c *Core) PendingStandbyAcks() bool { return len(c.acks) > 0 }
