package replayer

// EpochStarts is a table of where epochs start, from stream headers (or
// the failover state): a packet of epoch e keeps no record at or past the
// start of a later epoch (the failover cut e there; the new primary's
// records have those seqs). The Persister consults it before it appends
// a packet that may straddle a cut, and the standby to tell what its
// store holds of the stream.
//
// It holds the epochs of one session (a store holds one), sorted by
// epoch, whatever the order they are learned in: a standby cut off from
// raft may see a new epoch's packets from the stream before the failover
// state tells it of an epoch between (KnowEpoch), and that older start
// is the one that cuts its tail. Within a session an epoch starts where
// its predecessor was cut, at or after its predecessor's start (equal:
// the predecessor sequenced nothing), so a start that contradicts the
// table (the same epoch at another seq, or starts that decrease as
// epochs grow) is refused and counted (Refused), and the first one
// learned stays: such a start is a bug or another session's, and
// neither the stream nor the failover state would say which is right.
//
// It keeps the newest MaxEpochStarts epochs (a repair reaches back a few
// epochs at most): an epoch older than every kept one is forgotten at
// once when the table is full. Once full it allocates nothing.
type EpochStarts struct {
	list    []Epoch // ascending by Epoch, and by Start
	refused uint64
}

// MaxEpochStarts bounds an EpochStarts table.
const MaxEpochStarts = 64

// Add records that epoch starts at seq start, in order among the epochs
// known, and reports whether the table holds that start now (true also
// when it knew it already). It is false for a start that contradicts the
// table (counted by Refused) and for an epoch older than every one a full
// table keeps.
func (t *EpochStarts) Add(epoch uint32, start uint64) bool {
	i := len(t.list)
	for i > 0 && t.list[i-1].Epoch > epoch {
		i--
	}
	if i > 0 && t.list[i-1].Epoch == epoch {
		if t.list[i-1].Start == start {
			return true
		}
		t.refused++
		return false
	}
	if i > 0 && t.list[i-1].Start > start || i < len(t.list) && t.list[i].Start < start {
		t.refused++
		return false
	}
	e := Epoch{Epoch: epoch, Start: start}
	if len(t.list) < MaxEpochStarts {
		t.list = append(t.list, Epoch{})
		copy(t.list[i+1:], t.list[i:])
		t.list[i] = e
		return true
	}
	if i == 0 {
		return false // older than every kept epoch: the first to forget
	}
	copy(t.list, t.list[1:i])
	t.list[i-1] = e
	return true
}

// Refused counts the starts Add refused because they contradict the
// table.
func (t *EpochStarts) Refused() uint64 { return t.refused }

// After is the start of the first epoch after e that the table knows:
// where e's records end (none at or past it survived the failover).
func (t *EpochStarts) After(e uint32) (uint64, bool) {
	x, ok := t.Next(e)
	return x.Start, ok
}

// Next is the first epoch after e that the table knows, and its start.
func (t *EpochStarts) Next(e uint32) (Epoch, bool) {
	for i := range t.list {
		if t.list[i].Epoch > e {
			return t.list[i], true
		}
	}
	return Epoch{}, false
}
