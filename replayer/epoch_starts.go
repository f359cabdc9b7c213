package replayer

// EpochStarts is a table of where epochs start, from stream headers (or
// the failover state): a packet of epoch e keeps no record at or past the
// start of a later epoch (the failover cut e there; the new primary's
// records have those seqs). The persister and the standby consult it
// before they append a packet that may straddle a cut.
//
// It keeps the newest MaxEpochStarts epochs (a repair reaches back a few
// epochs at most) and grows only with the stream: an epoch at or below
// the newest known is ignored. Once full it allocates nothing.
type EpochStarts struct {
	list []Epoch // ascending by Epoch
}

// MaxEpochStarts bounds an EpochStarts table.
const MaxEpochStarts = 64

// Add records that epoch starts at seq start, when epoch is newer than
// every epoch known (an older one's start came first, or is forgotten).
func (t *EpochStarts) Add(epoch uint32, start uint64) {
	k := len(t.list)
	if k > 0 && epoch <= t.list[k-1].Epoch {
		return
	}
	if k == MaxEpochStarts {
		copy(t.list, t.list[1:])
		t.list = t.list[:k-1]
	}
	t.list = append(t.list, Epoch{Epoch: epoch, Start: start})
}

// After is the start of the first epoch after e that the table knows:
// where e's records end (none at or past it survived the failover).
func (t *EpochStarts) After(e uint32) (uint64, bool) {
	for i := range t.list {
		if t.list[i].Epoch > e {
			return t.list[i].Start, true
		}
	}
	return 0, false
}
