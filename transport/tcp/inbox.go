package tcp

import (
	"encoding/binary"
	"sync"

	"github.com/seqd/seqd/transport"
)

// A record in the inbox ring is an 8-byte header (frame length u32, peer
// u32) followed by the frame, padded to 8 bytes so that a header never
// straddles the end of the ring.
const (
	recordHeaderBytes = 8
	recordAlign       = 8
	// wrapMark in the length field says "the rest of the ring is unused;
	// the next record starts at offset 0".
	wrapMark = ^uint32(0)
)

func recordBytes(frameLen int) int {
	return recordHeaderBytes + (frameLen+recordAlign-1)&^(recordAlign-1)
}

// inbox is the receive queue of connections with no file descriptor (a
// test's wrapper), which the endpoint's Poll cannot read itself: a byte
// ring into which their reader goroutines copy frames and from which Poll,
// the only consumer, hands them to its Handler without copying again. It
// allocates nothing after construction.
//
// Ownership: [head, tail) holds records the consumer has not released yet.
// The consumer reads that range without the lock (producers never write
// there) and releases it under the lock after its handler calls returned,
// so a frame view is never overwritten while a handler holds it.
type inbox struct {
	mu     sync.Mutex
	room   sync.Cond // producers wait here for free space; Poll and close signal
	buf    []byte
	head   int // absolute byte positions; position p lives at buf[p%len(buf)]
	tail   int
	closed bool

	// signal wakes a waiting Poll (and a hybrid server waiting on
	// several endpoints at once, see Server.NotifyOnReceive) after a
	// push.
	signal func()
}

func newInbox(bytes int) *inbox {
	q := &inbox{buf: make([]byte, bytes&^(recordAlign-1))}
	q.room.L = &q.mu
	return q
}

// pushLocked copies frame into the ring, waiting for room. The caller holds
// q.mu. It returns false if the inbox was closed. frame must fit an empty
// ring (Config.Validate ensures MaxFrameBytes does).
func (q *inbox) pushLocked(peer transport.Peer, frame []byte) bool {
	size := len(q.buf)
	need := recordBytes(len(frame))
	var off, contig int
	for {
		if q.closed {
			return false
		}
		if q.head == q.tail {
			// Empty: restart at offset 0 so that the largest frame fits.
			q.head, q.tail = 0, 0
		}
		off = q.tail % size
		contig = size - off
		total := need
		if contig < need {
			total += contig
		}
		if size-(q.tail-q.head) >= total {
			break
		}
		q.room.Wait()
	}
	if contig < need {
		binary.LittleEndian.PutUint32(q.buf[off:], wrapMark)
		q.tail += contig
		off = 0
	}
	binary.LittleEndian.PutUint32(q.buf[off:], uint32(len(frame)))
	binary.LittleEndian.PutUint32(q.buf[off+4:], uint32(peer))
	copy(q.buf[off+recordHeaderBytes:], frame)
	q.tail += need
	return true
}

// pending returns the range of records the consumer may read, and false if
// the inbox is closed.
func (q *inbox) pending() (head, tail int, ok bool) {
	q.mu.Lock()
	head, tail, ok = q.head, q.tail, !q.closed
	q.mu.Unlock()
	return head, tail, ok
}

// release frees the records before upTo, which the consumer has handled.
func (q *inbox) release(upTo int) {
	q.mu.Lock()
	q.head = upTo
	q.room.Broadcast()
	q.mu.Unlock()
}

// record decodes the record at absolute position p: it returns the frame
// with the 4 peer bytes in front of it (so that a fault injector holding a
// frame back keeps its sender), and the position of the next record.
func (q *inbox) record(p int) (peerAndFrame []byte, nextPos int) {
	size := len(q.buf)
	off := p % size
	n := binary.LittleEndian.Uint32(q.buf[off:])
	if n == wrapMark {
		p += size - off
		off = 0
		n = binary.LittleEndian.Uint32(q.buf)
	}
	return q.buf[off+4 : off+recordHeaderBytes+int(n)], p + recordBytes(int(n))
}

// close fails later pushes and wakes every waiting producer.
func (q *inbox) close() {
	q.mu.Lock()
	q.closed = true
	q.room.Broadcast()
	q.mu.Unlock()
}
