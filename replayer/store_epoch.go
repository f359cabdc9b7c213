package replayer

import "math"

// An epoch restart: a failover cut epoch e at seq c, below the newest seq
// this store holds of epoch e (it got packets of the deposed primary that
// no quorum held), and epoch e+1 publishes other messages from c+1 on.
// The store keeps the cut frames where they were written, as received,
// and appends the new epoch after them in a new segment; readers skip the
// cut records by the epoch table (cutFrom), as a live receiver drops them.

// restartsEpoch reports whether a packet that does not follow the newest
// held is the start of a newer epoch that cuts the stream below it: the
// first packet of that epoch (its first record is the epoch start, whole
// or a first fragment), starting at or below the newest seq held and not
// below the current epoch's start.
func (s *Store) restartsEpoch(epoch uint32, epochStart, firstSeq uint64, frag bool, off uint32) bool {
	k := len(s.epochs)
	return s.tail.have && k > 0 && epoch > s.epochs[k-1].Epoch &&
		firstSeq == epochStart && (!frag || off == 0) &&
		epochStart >= s.epochs[k-1].Start && epochStart >= s.oldest.FirstSeq &&
		epochStart <= s.tail.lastSeq
}

// cutFrom is the first seq that a record carried by a packet of epoch h
// may not have: the start of the oldest newer epoch, where h was cut (no
// limit for the newest epoch). A record at or above it belongs to a
// deposed primary's tail and is never served.
func (s *Store) cutFrom(h uint32) uint64 { return cutFromTable(s.epochs, h) }

// cutFromTable is cutFrom on an epoch table (oldest first).
func cutFromTable(epochs []Epoch, h uint32) uint64 {
	k := len(epochs)
	if k == 0 || h >= epochs[k-1].Epoch {
		return math.MaxUint64
	}
	i := k - 1
	for i > 0 && epochs[i-1].Epoch > h {
		i--
	}
	return epochs[i].Start
}

// packetEpoch reads the epoch of a stored packet's header.
func packetEpoch(pkt []byte) uint32 { return le.Uint32(pkt[16:]) }
