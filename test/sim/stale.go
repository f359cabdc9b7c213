package sim

import "time"

// Replayed packets of an ended epoch. A deposed primary's datagrams can
// reach receivers long after the epoch change: delayed in a switch
// queue, resent by a misbehaving host, or captured and replayed. The
// world keeps copies of the last packets each epoch published (data,
// repairs and heartbeats alike) and, a while after the next epoch began,
// publishes them again to everyone. Their seqs at or below the cut are
// the history, resent; those above it are the cut-off tail, which no
// safe-mode receiver may deliver and no fast-mode receiver that already
// heard of the new epoch may deliver either (check, fence.go); a
// receiver must not follow them back into the old epoch, and the
// replayer and the standbys must not store them (their checks compare
// with the truth).

// staleKeep is how many of an epoch's last packets are replayed.
const staleKeep = 48

type stale struct {
	epoch uint32   // the epoch ring's packets belong to
	ring  [][]byte // its last packets, oldest first once full (next)
	next  int
	// pending: the ended epoch's packets waiting to be replayed at at.
	pending [][]byte
	at      int64
	again   bool // pending is replayed a second time, later
	sent    int  // packets replayed in the run (Result.StaleReplayed)
}

// remember keeps a copy of pkt, published in epoch; the first packet of
// a newer epoch schedules the older one's for replays (replayStale).
func (w *world) remember(pkt []byte) {
	s := &w.stale
	if !w.cfg.EpochChanges || !w.cfg.StaleEpochs {
		return
	}
	if s.epoch != w.epoch {
		if len(s.ring) > 0 && s.pending == nil {
			s.pending = append(s.ring[s.next:len(s.ring):len(s.ring)], s.ring[:s.next]...)
			// At once, racing the new epoch's first packets (a
			// receiver that has the cut seqs still empty is what the
			// fence is for), and again 0.5-50 ms later.
			s.at, s.again = w.now+w.rng.Int64N(int64(300*time.Microsecond)), true
		}
		s.epoch, s.ring, s.next = w.epoch, nil, 0
	}
	if len(s.ring) < staleKeep {
		s.ring = append(s.ring, append([]byte(nil), pkt...))
		return
	}
	s.ring[s.next] = append(s.ring[s.next][:0], pkt...)
	s.next = (s.next + 1) % staleKeep
}

// replayStale publishes the ended epoch's packets once their time came:
// twice, the second time 0.5-50 ms after the first.
func (w *world) replayStale() {
	s := &w.stale
	if s.pending == nil || w.now < s.at {
		return
	}
	for _, p := range s.pending {
		_ = w.srv.Publish(p)
	}
	s.sent += len(s.pending)
	if s.again {
		s.at, s.again = w.now+int64(500*time.Microsecond)+w.rng.Int64N(int64(50*time.Millisecond)), false
		return
	}
	s.pending = nil
}
