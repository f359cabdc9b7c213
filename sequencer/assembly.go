package sequencer

// assembly reassembles one fragmented command. It keeps the byte ranges it
// holds across resends, so a resent frame only fills holes, and reuses its
// buffer from one command to the next.
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
	if uint32(cap(a.buf)) < total {
		a.buf = make([]byte, total)
	}
	a.buf = a.buf[:total]
	a.have = a.have[:0]
}

func (a *assembly) clear() {
	a.cmdSeq = 0
	a.have = a.have[:0]
}

// add copies p to offset off (the wire decoder guarantees off+len(p) <=
// total) and reports whether the whole command is now held.
func (a *assembly) add(off uint32, p []byte) bool {
	if len(p) > 0 {
		copy(a.buf[off:], p)
		lo, hi := off, off+uint32(len(p))
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
