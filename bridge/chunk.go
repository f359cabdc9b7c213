package bridge

import (
	"encoding/binary"
	"time"

	"github.com/seqd/seqd/transport"
)

// A chunk carries packets from a channel's goroutine to the Service's:
// each packet as a 4-byte length and its bytes. Chunks are pooled, so
// the hand-off costs two channel operations per chunk and nothing is
// allocated per packet.
type chunk struct {
	ch int // the channel
	b  []byte
	at int64 // mono ns the first packet arrived
}

const (
	chunkBytes = 256 << 10
	chunkPool  = 64
)

// room reports whether a packet of n bytes fits.
func (c *chunk) room(n int) bool { return len(c.b)+4+n <= cap(c.b) }

func (c *chunk) put(pkt []byte) {
	c.b = binary.LittleEndian.AppendUint32(c.b, uint32(len(pkt)))
	c.b = append(c.b, pkt...)
}

// each calls f for every packet of the chunk.
func (c *chunk) each(f func(ch int, pkt []byte)) {
	b := c.b
	for len(b) >= 4 {
		n := int(binary.LittleEndian.Uint32(b))
		f(c.ch, b[4:4+n])
		b = b[4+n:]
	}
}

// pipe is the pool and the queue of chunks between the channels'
// goroutines and the Service's.
type pipe struct {
	full  chan *chunk
	free  chan *chunk
	stop  chan struct{}
	timer *time.Timer // take's wait (the Service's goroutine)
}

func newPipe(maxPacket int) *pipe {
	p := &pipe{full: make(chan *chunk, chunkPool), free: make(chan *chunk, chunkPool), stop: make(chan struct{})}
	for range chunkPool {
		p.free <- &chunk{b: make([]byte, 0, max(chunkBytes, 4+maxPacket))}
	}
	p.timer = time.NewTimer(time.Hour)
	p.timer.Stop()
	return p
}

// get takes a free chunk for channel ch; nil once stopped.
func (p *pipe) get(ch int) *chunk {
	select {
	case c := <-p.free:
		c.ch, c.b = ch, c.b[:0]
		return c
	case <-p.stop:
		return nil
	}
}

// send hands a chunk over; false once stopped.
func (p *pipe) send(c *chunk) bool {
	select {
	case p.full <- c:
		return true
	case <-p.stop:
		return false
	}
}

// take returns the next full chunk, waiting up to wait; nil if none.
func (p *pipe) take(wait time.Duration) (*chunk, error) {
	select {
	case c := <-p.full:
		return c, nil
	case <-p.stop:
		return nil, transport.ErrClosed
	default:
	}
	if wait <= 0 {
		return nil, nil
	}
	p.timer.Reset(wait)
	select {
	case c := <-p.full:
		p.timer.Stop()
		return c, nil
	case <-p.stop:
		p.timer.Stop()
		return nil, transport.ErrClosed
	case <-p.timer.C:
		return nil, nil
	}
}

func (p *pipe) recycle(c *chunk) { p.free <- c }
