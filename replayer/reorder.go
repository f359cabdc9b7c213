package replayer

import (
	"slices"

	"github.com/seqd/seqd/wire"
)

// Reorder holds copies of stream packets that arrived ahead of a gap, in
// stream order (first seq, then fragment offset), until a Store can take
// them. A receiver hands over every packet that brought it new records in
// the order they arrived (a repair comes after the packets that followed
// its hole), while a Store takes packets only in order and gap-free: the
// Persister (the replayer service's and the cluster standby's) parks the
// early ones here and appends them once the gap fills.
//
// At one stream position only one packet is kept: a duplicate is dropped,
// but a newer epoch's packet replaces an older one's (the deposed
// primary's record there was cut; the new primary's wins).
//
// Memory is bounded by bytes that arrived, never by a size a packet
// declares: at most maxBytes of frames are held (Put refuses more with
// ErrPendingFull), and the buffers of dropped frames are kept for reuse up
// to maxBytes more. A warm Reorder allocates nothing per packet.
//
// It is pure and not safe for concurrent use: its owner serialises calls.
type Reorder struct {
	held      []Held // held[head:] wait, sorted by (FirstSeq, Offset)
	head      int    // entries before it were dropped (compacted by Put)
	free      [][]byte
	freeBytes int // capacity of the buffers in free
	bytes     int // bytes of the frames held
	maxBytes  int
}

// Held is one frame a Reorder holds, with its place in the stream.
type Held struct {
	// Frame is the Reorder's copy: the caller may read it, or rewrite it
	// in place (cut records off its end), until Drop.
	Frame    []byte
	FirstSeq uint64
	LastSeq  uint64 // FirstSeq-1 for a packet with no records
	Offset   uint32 // fragment offset of the first record (0: whole)
	Epoch    uint32
}

// Init empties r and bounds it to maxBytes of frames held.
func (r *Reorder) Init(maxBytes int) {
	*r = Reorder{maxBytes: maxBytes, held: make([]Held, 0, 64)}
}

// Len is the number of frames held.
func (r *Reorder) Len() int { return len(r.held) - r.head }

// Bytes is the size of the frames held.
func (r *Reorder) Bytes() int { return r.bytes }

// First is the earliest frame held; Len must be above zero.
func (r *Reorder) First() Held { return r.held[r.head] }

// Drop forgets the earliest frame held (its buffer is kept for reuse).
func (r *Reorder) Drop() {
	h := &r.held[r.head]
	r.bytes -= len(h.Frame)
	r.recycle(h.Frame)
	*h = Held{}
	r.head++
	if r.head == len(r.held) {
		r.held, r.head = r.held[:0], 0
	}
}

// Put copies frame, a data packet or heartbeat a receiver accepted (only
// its header is read here), into its place. same reports that a frame was
// held at that place already: frame was dropped as a duplicate, or it
// replaced an older epoch's. Beyond maxBytes Put returns ErrPendingFull
// and holds what it held before. frame is only read during the call.
func (r *Reorder) Put(frame []byte) (same bool, err error) {
	if len(frame) < wire.PacketHeaderBytes {
		return false, wire.ErrShort
	}
	info := packetInfo(frame)
	h := Held{FirstSeq: info.FirstSeq, LastSeq: info.LastSeq(), Epoch: packetEpoch(frame)}
	if info.Fragment {
		h.Offset = info.FragFrom
	}
	r.compact()
	i, found := slices.BinarySearchFunc(r.held, h, comparePlace)
	old := 0
	if found {
		if h.Epoch <= r.held[i].Epoch {
			return true, nil
		}
		old = len(r.held[i].Frame)
	}
	if r.bytes-old+len(frame) > r.maxBytes {
		return found, ErrPendingFull
	}
	if found {
		r.recycle(r.held[i].Frame)
	}
	h.Frame = r.buffer(len(frame))
	copy(h.Frame, frame)
	if found {
		r.held[i] = h
	} else {
		r.held = slices.Insert(r.held, i, h)
	}
	r.bytes += len(frame) - old
	return found, nil
}

// comparePlace orders frames by stream position.
func comparePlace(a, b Held) int {
	switch {
	case a.FirstSeq != b.FirstSeq:
		if a.FirstSeq < b.FirstSeq {
			return -1
		}
		return 1
	case a.Offset < b.Offset:
		return -1
	case a.Offset > b.Offset:
		return 1
	}
	return 0
}

// compact moves the frames held to the front of the list (Drop only
// advances head, so a drain of n frames costs one move, not n).
func (r *Reorder) compact() {
	if r.head == 0 {
		return
	}
	k := copy(r.held, r.held[r.head:])
	clear(r.held[k:]) // drop the buffers' references from the old tail
	r.held, r.head = r.held[:k], 0
}

// buffer returns a buffer of n bytes: a free one that fits (among the
// newest few), or a new one.
func (r *Reorder) buffer(n int) []byte {
	for k := len(r.free) - 1; k >= 0 && k >= len(r.free)-4; k-- {
		if b := r.free[k]; cap(b) >= n {
			last := len(r.free) - 1
			r.free[k], r.free[last] = r.free[last], nil
			r.free = r.free[:last]
			r.freeBytes -= cap(b)
			return b[:n]
		}
	}
	return make([]byte, n, max(n, 2048))
}

// recycle keeps b for reuse while the free buffers stay within maxBytes.
func (r *Reorder) recycle(b []byte) {
	if r.freeBytes+cap(b) > r.maxBytes {
		return
	}
	r.free = append(r.free, b[:0])
	r.freeBytes += cap(b)
}
