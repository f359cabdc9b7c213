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

// BeginEpoch records that epoch begins at seq start without the epoch's
// first packet: a standby that healed onto a later packet of a new epoch
// (the first one lost) while its store holds a deposed primary's records
// past the cut. Without the row, the store would keep those records as
// its older epoch's, a later epoch's first packet would follow them, and
// the epoch table would skip this epoch: the store would serve cut
// records as history (sim seed 1457).
//
// The records held from start on are cut, as by an epoch restart: they
// stay on disk where they were written and are never served again;
// Contiguous (and Durable) fall to start-1, and the next packet appended
// must begin at start (the epoch's first packet, or a newer epoch's if
// this one published nothing). The row is written as an epoch-start
// segment (doc.go), fsynced unless SyncNone, and Open reads it back.
//
// An epoch the table holds at start already is a no-op. It refuses
// (ErrEpochStart) an epoch no newer than the newest held, a start below
// the newest epoch's start or at or below the oldest seq held, and
// (ErrGap) a start past the next seq to append or an empty store: the
// store stays gap-free. It allocates (it rolls a segment).
func (s *Store) BeginEpoch(epoch uint32, start uint64) error {
	if err := s.writable(); err != nil {
		return err
	}
	k := len(s.epochs)
	if k > 0 && epoch <= s.epochs[k-1].Epoch {
		for _, e := range s.epochs {
			if e.Epoch == epoch && e.Start == start {
				return nil
			}
		}
		return ErrEpochStart
	}
	if err := s.fitsEpochStart(epoch, start); err != nil {
		return err
	}
	if err := s.roll(start, epoch); err != nil {
		return err
	}
	s.cutTo(start)
	s.noteEpoch(epoch, start)
	if s.cfg.Sync != SyncNone {
		return s.sync()
	}
	return s.flush()
}

// fitsEpochStart checks that epoch may begin at start on what the store
// holds (BeginEpoch, and Open for an epoch-start segment).
func (s *Store) fitsEpochStart(epoch uint32, start uint64) error {
	k := len(s.epochs)
	switch {
	case !s.tail.have || start > s.tail.next():
		return ErrGap
	case start <= s.oldest.FirstSeq, k > 0 && (epoch <= s.epochs[k-1].Epoch || start < s.epochs[k-1].Start):
		return ErrEpochStart
	}
	return nil
}

// cutTo makes the newest segment, an epoch-start one just rolled or
// opened, begin the stream again at start: nothing from start on is
// held.
func (s *Store) cutTo(start uint64) {
	seg := &s.segs[len(s.segs)-1]
	s.tail = tailState{have: true, lastSeq: start - 1, whole: true}
	seg.tail = s.tail
	seg.last = s.newest
	s.cutDurable(start - 1)
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

// epochEndTable is the last seq of epoch h (the seq before the start of
// epoch h+1) when the table holds epoch h+1, else 0. A store that missed
// epoch h+1 (its table jumps from h to a later epoch) does not know
// where h was cut: below that later epoch's start, but how far below it
// cannot tell, so it vouches for none of it (see
// sequencer.PacketInfo.EpochEnd).
func epochEndTable(epochs []Epoch, h uint32) uint64 {
	for i := len(epochs) - 1; i >= 0 && epochs[i].Epoch > h; i-- {
		if epochs[i].Epoch == h+1 {
			return epochs[i].Start - 1
		}
	}
	return 0
}

// packetEpoch reads the epoch of a stored packet's header.
func packetEpoch(pkt []byte) uint32 { return le.Uint32(pkt[16:]) }
