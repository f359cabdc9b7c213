package sequencer

import "fmt"

// The checks below run when internal/invariants is Enabled (-race, or
// -tags invariants): the Core's at the start of every call into it (see
// advance), the ring's after every commit. Each is O(1), so a -race run
// of the simulator checks them at every step. They panic: a broken one
// is a bug here, never bad input.

// checkInvariants checks the Core between two calls: the positions agree
// with each other, with the open packet (batching) and with the ring.
func (c *Core) checkInvariants() {
	switch {
	case c.stableSent > c.stable || c.stable > c.published:
		panic(fmt.Sprintf("sequencer: stable sent %d, stable %d, published %d: want sent <= stable <= published", c.stableSent, c.stable, c.published))
	case c.published > c.tail || c.tail >= c.nextSeq:
		panic(fmt.Sprintf("sequencer: published %d, tail %d, next seq %d: want published <= tail < next", c.published, c.tail, c.nextSeq))
	case c.partial:
		panic("sequencer: a call returned with a fragment packet half published")
	}
	if c.open {
		// The open packet holds every seq assigned since the last publish.
		n := c.w.Count()
		switch {
		case n == 0 || n > maxRecords:
			panic(fmt.Sprintf("sequencer: open packet holds %d records, want 1..%d", n, maxRecords))
		case c.openInfo.FirstSeq+uint64(n) != c.nextSeq:
			panic(fmt.Sprintf("sequencer: open packet holds seqs %d+%d, next seq is %d", c.openInfo.FirstSeq, n, c.nextSeq))
		case c.published+1 != c.openInfo.FirstSeq:
			panic(fmt.Sprintf("sequencer: open packet starts at %d, published ends at %d", c.openInfo.FirstSeq, c.published))
		}
	} else if c.tail+1 != c.nextSeq || c.published != c.tail {
		panic(fmt.Sprintf("sequencer: no packet open, but published %d, tail %d, next seq %d", c.published, c.tail, c.nextSeq))
	}
	if r := &c.ring; r.first < r.next {
		if last := r.entry(r.next - 1).lastSeq(); last != c.tail {
			panic(fmt.Sprintf("sequencer: the ring's newest packet ends at seq %d, the core's tail is %d", last, c.tail))
		}
	}
}

// checkInvariants checks the ring after a commit: the window of packets
// fits the index and RingBytes, the newest packet lies in one chunk right
// after the one before it and does not overlap it, and seqs do not go
// back (search's binary search depends on it).
func (r *ring) checkInvariants() {
	switch {
	case r.first > r.next || r.next-r.first > uint64(len(r.idx)):
		panic(fmt.Sprintf("sequencer: ring holds packets %d..%d in an index of %d", r.first, r.next, len(r.idx)))
	case len(r.idx)&(len(r.idx)-1) != 0 || len(r.idx) > r.maxIdx:
		panic(fmt.Sprintf("sequencer: ring index of %d entries, want a power of two up to %d", len(r.idx), r.maxIdx))
	case r.head > r.tail || r.tail-r.head > r.limit:
		panic(fmt.Sprintf("sequencer: ring bytes %d..%d, more than RingBytes %d", r.head, r.tail, r.limit))
	case r.first == r.next:
		return
	case r.entry(r.first).pos != r.head:
		panic(fmt.Sprintf("sequencer: ring head %d, oldest packet at %d", r.head, r.entry(r.first).pos))
	}
	e := r.entry(r.next - 1)
	switch {
	case e.pos+uint64(e.n) != r.tail:
		panic(fmt.Sprintf("sequencer: newest packet at %d+%d, ring tail %d", e.pos, e.n, r.tail))
	case e.pos&(r.chunkBytes-1)+uint64(e.n) > r.chunkBytes:
		panic(fmt.Sprintf("sequencer: packet at %d+%d straddles a chunk of %d", e.pos, e.n, r.chunkBytes))
	case e.count == 0:
		panic(fmt.Sprintf("sequencer: packet at %d holds no record", e.pos))
	}
	if r.next-r.first < 2 {
		return
	}
	p := r.entry(r.next - 2)
	switch {
	case p.pos+uint64(p.n) > e.pos:
		panic(fmt.Sprintf("sequencer: packet at %d+%d overlaps the next at %d", p.pos, p.n, e.pos))
	case e.firstSeq < p.lastSeq() || e.firstSeq == p.lastSeq() && !(p.frag && e.frag):
		panic(fmt.Sprintf("sequencer: packet of seqs %d..%d after one of %d..%d", e.firstSeq, e.lastSeq(), p.firstSeq, p.lastSeq()))
	}
}
