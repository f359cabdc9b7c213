package multicast

import (
	"net"

	"golang.org/x/net/ipv4"

	"github.com/seqd/seqd/transport"
)

// sendQueue copies frames into an arena allocated once and hands them to
// the kernel with sendmmsg(2) (ipv4.PacketConn.WriteBatch, which allocates
// nothing per batch: measured 0 with x/net v0.62).
type sendQueue struct {
	s     *socket
	msgs  []ipv4.Message
	bufs  [][]byte // bufs[i] is msgs[i].Buffers[0]
	arena []byte
	used  int
	n     int
	max   int

	// Totals, written by the endpoint's goroutine only.
	frames, bytes, failed uint64
}

func newSendQueue(s *socket, cfg *resolved) *sendQueue {
	arena := cfg.BatchSize * min(cfg.MaxDatagramBytes, 2048)
	q := &sendQueue{
		s:     s,
		msgs:  make([]ipv4.Message, cfg.BatchSize),
		bufs:  make([][]byte, cfg.BatchSize),
		arena: make([]byte, max(arena, cfg.MaxDatagramBytes)),
		max:   cfg.MaxDatagramBytes,
	}
	for i := range q.msgs {
		q.msgs[i].Buffers = q.bufs[i : i+1]
	}
	return q
}

// add copies frame for to, flushing first when the batch or arena is full.
func (q *sendQueue) add(frame []byte, to *net.UDPAddr) error {
	if len(frame) > q.max {
		return transport.ErrFrameTooLarge
	}
	if q.n == len(q.msgs) || q.used+len(frame) > len(q.arena) {
		if err := q.flush(); err != nil {
			return err
		}
	}
	b := q.arena[q.used : q.used+len(frame)]
	copy(b, frame)
	q.used += len(frame)
	q.bufs[q.n] = b
	q.msgs[q.n].Addr = to
	q.n++
	return nil
}

// flush sends every queued datagram. A datagram the kernel refuses is
// skipped and counted (datagrams may be lost; the protocol repairs), and
// the first refusal is returned wrapped in ErrSend once the rest are sent.
func (q *sendQueue) flush() error {
	var first error
	for sent := 0; sent < q.n; {
		k, err := q.s.pc.WriteBatch(q.msgs[sent:q.n], 0)
		for _, m := range q.msgs[sent : sent+k] {
			q.bytes += uint64(len(m.Buffers[0]))
		}
		q.frames += uint64(k)
		sent += k
		if err != nil {
			if first == nil {
				first = err
			}
			q.failed++
			sent++
		}
	}
	for i := range q.n {
		q.bufs[i] = nil
		q.msgs[i].Addr = nil
	}
	q.n, q.used = 0, 0
	if first != nil {
		return sendError{first}
	}
	return nil
}
