package sequencer

import "github.com/seqd/seqd/wire"

// assembly reassembles one fragmented command. It keeps the byte ranges it
// holds across resends, so a resent frame only fills holes. Its buffer
// grows with the bytes that arrive (up to the declared total), not with
// the total a fragment declares: a fragment reaching beyond twice the
// bytes held plus aheadSlackBytes is refused (fits), and is reused from
// one command to the next.
type assembly struct {
	cmdSeq uint64 // command being reassembled; 0 = none
	total  uint32
	buf    []byte
	have   []span // disjoint, sorted, non-adjacent ranges held
}

type span struct{ from, to uint32 }

func (a *assembly) start(cmdSeq uint64, total uint32) {
	a.cmdSeq = cmdSeq
	a.total = total
	a.buf = a.buf[:0]
	a.have = a.have[:0]
}

// aheadSlackBytes bounds how far beyond twice the bytes held a fragment
// may reach, so that the buffer (and the budget charged) grows with the
// bytes that arrived, never with an offset a packet declares. A node
// sends fragments in order; one far ahead (reordered, or forged) is
// dropped and comes again with the node's resend.
const aheadSlackBytes = 256 << 10

// held is the number of bytes held.
func (a *assembly) held() uint64 {
	n := uint64(0)
	for _, s := range a.have {
		n += uint64(s.to - s.from)
	}
	return n
}

// grows is how many bytes the buffer must grow (its length: the bytes
// addressable) to take p at off, and whether that is near enough to the
// bytes held (aheadSlackBytes).
func (a *assembly) grows(off uint32, p []byte) (int, bool) {
	end := uint64(off) + uint64(len(p))
	if end <= uint64(len(a.buf)) {
		return 0, true
	}
	if end > 2*a.held()+aheadSlackBytes {
		return 0, false
	}
	return int(end) - len(a.buf), true
}

func (a *assembly) clear() {
	a.cmdSeq = 0
	a.have = a.have[:0]
}

// add copies p to offset off (the wire decoder guarantees off+len(p) <=
// total) and reports whether the whole command is now held.
func (a *assembly) add(off uint32, p []byte) bool {
	if len(p) > 0 {
		end := off + uint32(len(p))
		if int(end) > len(a.buf) {
			if int(end) > cap(a.buf) {
				// Grow by doubling, never past the declared total.
				n := min(max(int(end), 2*cap(a.buf)), int(a.total))
				nb := make([]byte, int(end), n)
				copy(nb, a.buf)
				a.buf = nb
			} else {
				a.buf = a.buf[:end]
			}
		}
		copy(a.buf[off:], p)
		lo, hi := off, end
		i := 0
		for i < len(a.have) && a.have[i].to < lo {
			i++
		}
		j := i
		for j < len(a.have) && a.have[j].from <= hi {
			lo = min(lo, a.have[j].from)
			hi = max(hi, a.have[j].to)
			j++
		}
		switch {
		case i == j: // no overlap: insert
			a.have = append(a.have, span{})
			copy(a.have[i+1:], a.have[i:])
			a.have[i] = span{lo, hi}
		default: // merge have[i:j] into one
			a.have[i] = span{lo, hi}
			a.have = append(a.have[:i+1], a.have[j:]...)
		}
	}
	if a.total == 0 {
		return true
	}
	return len(a.have) == 1 && a.have[0].from == 0 && a.have[0].to == a.total
}

// senderKey names a sender: (account, instance).
type senderKey struct {
	account  wire.Account
	instance uint8
}

// reassembly is a command being reassembled for one sender, with the
// budget it is charged (the bytes its buffer addresses, which grow with
// the bytes that arrived) and the last time a fragment came (on the
// core's clock), by which an abandoned one is forgotten.
type reassembly struct {
	key         senderKey
	incarnation uint64
	reserved    int
	touched     int64
	asm         assembly
}

// reassemblies holds the commands being reassembled, one per sender at
// most. It is not part of State: nothing of it is in the stream until the
// command is whole. Its bounds: MaxReassemblyBytes of bytes charged (as
// they arrive), all senders together, and ReassemblyTimeout of silence,
// after which a
// reassembly is dropped and its budget freed (its sender died, or moved
// on); a resend then starts it again.
type reassemblies struct {
	index    map[senderKey]int32
	list     []reassembly
	free     []int32
	reserved int // sum of reserved
}

func (t *reassemblies) init() { t.index = make(map[senderKey]int32) }

// get returns the reassembly of k, or nil.
func (t *reassemblies) get(k senderKey) *reassembly {
	i, ok := t.index[k]
	if !ok {
		return nil
	}
	return &t.list[i]
}

// open starts a reassembly for k, charged nothing until bytes arrive; a
// buffer of a dropped reassembly is reused.
func (t *reassemblies) open(k senderKey, incarnation, cmdSeq uint64, total uint32, now int64) *reassembly {
	var i int32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.list = append(t.list, reassembly{})
		i = int32(len(t.list) - 1)
	}
	r := &t.list[i]
	r.key, r.incarnation, r.reserved, r.touched = k, incarnation, 0, now
	r.asm.start(cmdSeq, total)
	t.index[k] = i
	return r
}

// drop ends the reassembly of k and frees its budget. A buffer above
// keepAssemblyBytes is released: many senders each keeping a 16 MiB
// buffer would pin gigabytes.
func (t *reassemblies) drop(k senderKey) {
	i, ok := t.index[k]
	if !ok {
		return
	}
	r := &t.list[i]
	t.reserved -= r.reserved
	r.reserved = 0
	r.asm.clear()
	if cap(r.asm.buf) > keepAssemblyBytes {
		r.asm.buf = nil
	}
	delete(t.index, k)
	t.free = append(t.free, i)
}

// expire drops every reassembly untouched since before and returns how
// many it dropped.
func (t *reassemblies) expire(before int64) int {
	n := 0
	for i := range t.list {
		r := &t.list[i]
		if r.asm.cmdSeq != 0 && r.touched < before {
			t.drop(r.key)
			n++
		}
	}
	return n
}

// keepAssemblyBytes: a reassembly buffer up to this size is kept for the
// next fragmented command; a larger one is released.
const keepAssemblyBytes = 1 << 20
