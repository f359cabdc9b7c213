package mem

import "github.com/seqd/seqd/transport"

// entry is one frame waiting in an inbox.
type entry struct {
	at    int64  // virtual time at which it becomes deliverable
	order uint64 // network-wide send order: ties on at keep send order
	from  transport.Peer
	buf   *frameBuf // one reference, dropped when delivered or discarded
}

func (a *entry) before(b *entry) bool {
	return a.at < b.at || (a.at == b.at && a.order < b.order)
}

// inbox is a binary min-heap of entries by (at, order), written by hand
// because container/heap would box every entry in an interface.
type inbox struct {
	q []entry
}

func (in *inbox) len() int { return len(in.q) }

// peek returns the earliest entry; the inbox must not be empty.
func (in *inbox) peek() *entry { return &in.q[0] }

func (in *inbox) push(e entry) {
	in.q = append(in.q, e)
	i := len(in.q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !in.q[i].before(&in.q[p]) {
			break
		}
		in.q[i], in.q[p] = in.q[p], in.q[i]
		i = p
	}
}

func (in *inbox) pop() entry {
	q := in.q
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = entry{} // drop the buffer reference from the spare slot
	q = q[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q[r].before(&q[l]) {
			m = r
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	in.q = q
	return top
}
