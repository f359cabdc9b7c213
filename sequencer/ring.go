package sequencer

import (
	"github.com/seqd/seqd/internal/invariants"
	"github.com/seqd/seqd/wire"
)

// ringChunkBytes is the unit in which the ring's memory is allocated, as it
// fills: an idle sequencer holds one chunk, not its whole RingBytes.
const ringChunkBytes = 4 << 20

// ring is the retransmit ring: the newest published packets, back to back,
// at most RingBytes of them. It implements RetransmitStore.
//
// Bytes have logical positions that only grow; position x lives in chunk
// (x>>chunkShift) % len(chunks) at offset x&(chunkBytes-1). A packet never
// straddles two chunks: one that would is moved to the next chunk's start,
// and the bytes skipped are padding. Eviction keeps tail-head within
// limit (RingBytes) <= capBytes, so everything from head to tail is
// distinct memory.
//
// Packets are numbered in publish order; packet p's entry is
// idx[p&(len(idx)-1)]. The index doubles as the ring fills, up to the most
// packets RingBytes can hold; the chunks are allocated on first use. Once
// the ring has wrapped, nothing is allocated.
type ring struct {
	chunks     [][]byte
	chunkBytes uint64 // a power of two
	chunkShift uint
	limit      uint64 // RingBytes
	head       uint64 // position of the oldest retained byte
	tail       uint64 // position after the newest committed packet
	claimed    uint64 // position of the region claim returned

	idx    []ringEntry
	maxIdx int    // len(idx) never exceeds it
	first  uint64 // oldest retained packet
	next   uint64 // next packet to commit
}

// ringEntry locates and describes one retained packet.
type ringEntry struct {
	pos      uint64
	firstSeq uint64
	n        uint32 // bytes
	count    uint16 // records
	frag     bool
	fragFrom uint32
	fragTo   uint32
}

func (e *ringEntry) info() PacketInfo {
	return PacketInfo{FirstSeq: e.firstSeq, Count: int(e.count), Fragment: e.frag, FragFrom: e.fragFrom, FragTo: e.fragTo}
}

func (e *ringEntry) lastSeq() uint64 { return e.firstSeq + uint64(e.count) - 1 }

// init sizes the ring for bytes of packets of at most maxPacket bytes
// (Validate guarantees bytes >= 2*maxPacket). It allocates the chunk table
// and a small index only.
func (r *ring) init(bytes, maxPacket int) {
	total := uint64(bytes)
	*r = ring{chunkBytes: 1, limit: total}
	for r.chunkBytes < min(total, ringChunkBytes) {
		r.chunkBytes <<= 1
		r.chunkShift++
	}
	r.chunks = make([][]byte, (total+r.chunkBytes-1)/r.chunkBytes)
	// The smallest packet is a header and one empty record.
	most := total / (wire.PacketHeaderBytes + wire.RecordHeaderBytes)
	r.maxIdx = 1
	for uint64(r.maxIdx) < most {
		r.maxIdx <<= 1
	}
	r.idx = make([]ringEntry, min(1024, r.maxIdx))
}

func (r *ring) entry(p uint64) *ringEntry { return &r.idx[p&uint64(len(r.idx)-1)] }

// at returns n bytes at position pos (which does not straddle chunks).
func (r *ring) at(pos uint64, n int) []byte {
	c := &r.chunks[(pos>>r.chunkShift)%uint64(len(r.chunks))]
	if *c == nil {
		*c = make([]byte, r.chunkBytes)
	}
	off := pos & (r.chunkBytes - 1)
	return (*c)[off : off+uint64(n) : off+uint64(n)]
}

// evict forgets the oldest packet.
func (r *ring) evict() {
	r.first++
	if r.first < r.next {
		r.head = r.entry(r.first).pos
	} else {
		r.head = r.tail
	}
}

// grow doubles the index, keeping every entry at its packet number.
func (r *ring) grow() {
	old := r.idx
	r.idx = make([]ringEntry, 2*len(old))
	for p := r.first; p < r.next; p++ {
		*r.entry(p) = old[p&uint64(len(old)-1)]
	}
}

// claim returns n contiguous bytes (n <= min(chunkBytes, limit/2)) for the next packet to
// be built in, evicting the oldest packets to make room. The caller writes
// the packet there and calls commit; until then the ring is unchanged
// apart from the evictions.
func (r *ring) claim(n int) []byte {
	pos := r.tail
	if off := pos & (r.chunkBytes - 1); off+uint64(n) > r.chunkBytes {
		pos += r.chunkBytes - off // padding: a packet stays in one chunk
	}
	end := pos + uint64(n)
	for end-r.head > r.limit {
		if r.first == r.next {
			r.head = pos
			break
		}
		r.evict()
	}
	if r.next-r.first == uint64(len(r.idx)) {
		if len(r.idx) < r.maxIdx {
			r.grow()
		} else {
			r.evict()
		}
	}
	r.claimed = pos
	return r.at(pos, n)
}

// commit records the packet of n bytes built in the claimed region.
func (r *ring) commit(n int, info *PacketInfo) {
	e := r.entry(r.next)
	e.pos, e.firstSeq, e.n, e.count = r.claimed, info.FirstSeq, uint32(n), uint16(info.Count)
	e.frag, e.fragFrom, e.fragTo = info.Fragment, info.FragFrom, info.FragTo
	if r.first == r.next {
		r.head = r.claimed
	}
	r.tail = r.claimed + uint64(n)
	r.next++
	if invariants.Enabled {
		r.checkInvariants()
	}
}

// Put stores a copy of pkt (RetransmitStore). The Core does not use it: it
// builds each packet in place with claim and commit.
func (r *ring) Put(pkt []byte, info PacketInfo) {
	copy(r.claim(len(pkt)), pkt)
	r.commit(len(pkt), &info)
}

// Oldest describes the oldest retained packet (RetransmitStore).
func (r *ring) Oldest() (PacketInfo, bool) {
	if r.first == r.next {
		return PacketInfo{}, false
	}
	return r.entry(r.first).info(), true
}

// Newest describes the newest retained packet (RetransmitStore).
func (r *ring) Newest() (PacketInfo, bool) {
	if r.first == r.next {
		return PacketInfo{}, false
	}
	return r.entry(r.next - 1).info(), true
}

// Range calls fn for the retained packets carrying a record of from..to
// (RetransmitStore): a binary search for the first, then in order.
func (r *ring) Range(from, to uint64, fn PacketFunc) {
	for p := r.search(from); p < r.next; p++ {
		e := r.entry(p)
		if e.firstSeq > to || !fn(r.at(e.pos, int(e.n)), e.info()) {
			return
		}
	}
}

// retainedBytes is the sum of the retained packets' sizes (tests, stats).
func (r *ring) retainedBytes() uint64 {
	var n uint64
	for p := r.first; p < r.next; p++ {
		n += uint64(r.entry(p).n)
	}
	return n
}

// posOf returns the position of the oldest retained packet carrying seq;
// false when seq is not retained (evicted, or not published yet).
func (r *ring) posOf(seq uint64) (uint64, bool) {
	p := r.search(seq)
	if p == r.next || r.entry(p).firstSeq > seq {
		return 0, false
	}
	return r.entry(p).pos, true
}

// search returns the oldest retained packet whose last seq is >= seq, or
// r.next when there is none.
func (r *ring) search(seq uint64) uint64 {
	lo, hi := r.first, r.next
	for lo < hi {
		mid := lo + (hi-lo)/2
		if r.entry(mid).lastSeq() < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
