package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/seqd/seqd/internal/tlsconf"
	"io"
	"net"
	"sync"
	"time"

	"github.com/seqd/seqd/wire"
)

// Rewind over TCP (docs/protocol.md, "Rewind"): with Config.Rewind and
// SetRewindAddr, once the first live packet fixed the session, Run opens
// one connection to a replayer, asks for the
// stream from Config.RewindFrom with wire.RewindFollow, and feeds the
// stored packets to the Core as repairs (Core.StepRewind) while the live
// stream goes on arriving through the transport and is buffered by the
// receiver. A goroutine reads the connection into a few large chunks
// (checking every frame's CRC on its own core); Run takes whole chunks,
// so the hand-off costs two channel operations per chunk, nothing per
// message. When the Core has caught up (Core.RewindCaughtUp) Run closes
// the connection and the live stream carries on.

// rewindChunks and rewindChunkBytes: the read-ahead of a rewind (TCP
// backpressure holds the replayer beyond it).
const (
	rewindChunks     = 4
	rewindChunkBytes = 1<<20 + wire.RewindFrameHeaderBytes
	rewindDialWait   = 5 * time.Second
	rewindReplyWait  = 10 * time.Second
)

type rewindChunk struct {
	b []byte
	n int // whole, checked frames in b[:n]
}

// rewindStream is one rewind connection and its reading goroutine.
type rewindStream struct {
	addr  string
	tls   *tls.Config   // Config.RewindTLS
	delay time.Duration // before dialing (a retry)
	full  chan rewindChunk
	free  chan []byte
	errc  chan error // the reader's end (cap 1)
	stop  chan struct{}
	wake  func()

	mu   sync.Mutex
	conn net.Conn
}

// SetRewindAddr makes Run rewind from the replayer at addrs[0] (host:port
// of its rewind listener) when Config.Rewind is set. When a rewind fails
// before the node caught up (the replayer died, refused, closed), Run
// resumes it from the next seq to deliver at the next address (cycling);
// it gives up (ErrRewind) after two failures per address with no message
// delivered in between. Call it before Run.
func (n *Node) SetRewindAddr(addrs ...string) { n.rewindAddrs = addrs }

// RewindSource names the replayer a rewind resumes from after the one at
// failed stopped serving it (it died, refused, or ended the stream)
// before the node caught up: the next one must hold seq from, where the
// rewind resumes (the next seq to deliver, so nothing is skipped and
// nothing delivered twice). "" means none is known now: the next
// SetRewindAddr address is tried. It runs on Run's goroutine and must
// return at once (a gossip lookup: tiered.Agent.RewindSource).
type RewindSource func(from uint64, failed string) string

// SetRewindSource makes a failed rewind resume from the replayer src
// names (a replayer found by gossip) rather than the next SetRewindAddr
// address. With it, the node gives up (ErrRewind) only after
// RewindFailoverWait with no progress, retrying after a growing pause
// (rewindRetryMax at most): gossip takes a few probes to see a replayer
// die. Call it before Run.
func (n *Node) SetRewindSource(src RewindSource) { n.rewindSrc = src }

// RewindFailovers is how many times a failed rewind resumed on another
// (or the same) replayer. Safe from any goroutine.
func (n *Node) RewindFailovers() uint64 { return n.rewindFailover.Load() }

// RewindFailoverWait: with a RewindSource, a rewind whose replayers keep
// failing gives up once this long passed with no message delivered.
const RewindFailoverWait = 20 * time.Second

const rewindRetryMax = time.Second

// openRewind starts the rewind goroutine (Run goroutine) from the next
// seq to deliver, at the current address.
func (n *Node) openRewind() {
	n.openRewindAt(n.rewindAddrs[n.rewindIdx%len(n.rewindAddrs)], 0)
}

// openRewindAt starts the rewind goroutine for addr, dialing after delay.
func (n *Node) openRewindAt(addr string, delay time.Duration) {
	rw := &rewindStream{addr: addr, tls: n.cfg.RewindTLS, delay: delay, full: make(chan rewindChunk, rewindChunks),
		free: make(chan []byte, rewindChunks), errc: make(chan error, 1), stop: make(chan struct{})}
	for i := 0; i < rewindChunks; i++ {
		rw.free <- make([]byte, rewindChunkBytes)
	}
	if n.waker != nil {
		w := n.waker
		rw.wake = func() {
			if n.polling.CompareAndSwap(true, false) {
				w.Wake()
			}
		}
	}
	n.rw = rw
	n.rewindOpen.Store(true)
	n.core.SetRewindOpen(true)
	from := max(1, n.cfg.RewindFrom, n.core.ResumeFrom())
	req := wire.RewindRequest{Session: n.core.Session(), FromSeq: from, Flags: wire.RewindFollow}
	go rw.run(req)
}

// retryRewind replaces a failed rewind by one from the next address,
// resuming after the highest seq the node holds whole (Core.ResumeFrom),
// or returns err when the rewinds keep failing with no progress.
func (n *Node) retryRewind(err error) error {
	next := n.core.ResumeFrom()
	now := time.Now()
	if next > n.rewindProgress || n.rewindSince.IsZero() {
		n.rewindProgress, n.rewindFails, n.rewindSince = next, 0, now
	}
	n.rewindFails++
	failed := n.rw.addr
	n.stopRewind()
	giveUp := n.rewindFails >= 2*len(n.rewindAddrs)
	if n.rewindSrc != nil {
		giveUp = now.Sub(n.rewindSince) > RewindFailoverWait
	}
	if giveUp {
		n.core.SetRewindOpen(false)
		n.rewindOpen.Store(false)
		if n.rewindSrc != nil {
			return fmt.Errorf("%w (no replayer served seq %d for %v)", err, next, RewindFailoverWait)
		}
		return err
	}
	n.rewindIdx++
	n.rewindFailover.Add(1)
	addr := n.rewindAddrs[n.rewindIdx%len(n.rewindAddrs)]
	var delay time.Duration
	if n.rewindSrc != nil {
		if a := n.rewindSrc(next, failed); a != "" {
			addr = a
		}
		if n.rewindFails > 1 || addr == failed {
			delay = min(rewindRetryMax, 25*time.Millisecond<<min(n.rewindFails, 6))
		}
	}
	n.openRewindAt(addr, delay)
	return nil
}

// closeRewind ends the rewind (Run goroutine).
func (n *Node) closeRewind() {
	if n.rw == nil {
		return
	}
	n.stopRewind()
	n.core.SetRewindOpen(false)
	n.rewindOpen.Store(false)
}

// stopRewind closes the rewind connection and stops its goroutine.
func (n *Node) stopRewind() {
	rw := n.rw
	n.rw = nil
	close(rw.stop)
	rw.mu.Lock()
	if rw.conn != nil {
		rw.conn.Close()
	}
	rw.mu.Unlock()
}

// RewindOpen reports whether the rewind connection is open: from Run's
// start (with Config.Rewind and SetRewindAddr) until the node caught up
// with the live stream (Core.RewindCaughtUp), which is at or after the
// moment Rewinding turns false.
func (n *Node) RewindOpen() bool { return n.rewindOpen.Load() }

// pumpRewind feeds the chunks read so far to the Core, once the live
// stream started it, and closes the rewind when the Core caught up. It
// returns an error when the rewind failed before that.
func (n *Node) pumpRewind(now int64) error {
	if err := n.feedRewind(now); err != nil {
		return n.retryRewind(err)
	}
	return nil
}

func (n *Node) feedRewind(now int64) error {
	rw := n.rw
	if !n.core.Started() {
		return rw.failed()
	}
	for i := 0; i < rewindChunks; i++ {
		var ch rewindChunk
		select {
		case ch = <-rw.full:
		default:
			return rw.failed()
		}
		b := ch.b[:ch.n]
		for len(b) > 0 {
			k := int(le32(b[4:])) + wire.RewindFrameHeaderBytes
			if err := n.core.StepRewind(now, b[wire.RewindFrameHeaderBytes:k]); err != nil && n.core.Err() != nil {
				return nil // Run reports the Core's error
			}
			b = b[k:]
			if n.core.RewindCaughtUp() {
				rw.free <- ch.b
				n.closeRewind()
				return nil
			}
		}
		rw.free <- ch.b
	}
	return rw.failed()
}

// failed is the reader's error, if it ended before the rewind closed.
func (rw *rewindStream) failed() error {
	select {
	case err := <-rw.errc:
		rw.errc <- err // sticky
		return err
	default:
		return nil
	}
}

// ready reports whether a chunk waits.
func (rw *rewindStream) ready() bool { return len(rw.full) > 0 }

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// run is the reading goroutine: connect, ask, read chunks of whole
// checked frames until stopped or the stream fails.
func (rw *rewindStream) run(req wire.RewindRequest) {
	err := rw.read(req)
	select {
	case <-rw.stop:
		return // closed by the node: not a failure
	default:
	}
	rw.errc <- fmt.Errorf("%w: replayer %s, from seq %d: %w", ErrRewind, rw.addr, req.FromSeq, err)
	if rw.wake != nil {
		rw.wake()
	}
}

func (rw *rewindStream) read(req wire.RewindRequest) error {
	if rw.delay > 0 {
		t := time.NewTimer(rw.delay)
		select {
		case <-t.C:
		case <-rw.stop:
			t.Stop()
			return nil
		}
	}
	c, err := tlsconf.Dial(rw.addr, rw.tls, rewindDialWait)
	if err != nil {
		return err
	}
	rw.mu.Lock()
	rw.conn = c
	select {
	case <-rw.stop:
		c.Close()
	default:
	}
	rw.mu.Unlock()
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 20)
	}
	if _, err := c.Write(wire.AppendRewindRequest(nil, &req)); err != nil {
		return err
	}
	var hb [wire.RewindReplyBytes]byte
	c.SetReadDeadline(time.Now().Add(rewindReplyWait))
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	var rep wire.RewindReply
	if err := wire.DecodeRewindReply(hb[:], &rep); err != nil {
		return err
	}
	switch rep.Status {
	case wire.RewindOK:
	case wire.RewindGone:
		return fmt.Errorf("refused: it holds seqs from %d only", rep.Oldest)
	case wire.RewindBadSession:
		return fmt.Errorf("refused: it holds session %d, not %d", rep.Session, req.Session)
	default:
		return fmt.Errorf("refused (status %d)", rep.Status)
	}
	var buf []byte
	select {
	case buf = <-rw.free:
	case <-rw.stop:
		return nil
	}
	have := 0
	for {
		m, rerr := c.Read(buf[have:])
		have += m
		w := 0
		for w+wire.RewindFrameHeaderBytes <= have {
			k, err := wire.RewindFrameLen(buf[w:have], wire.RewindMaxPacketBytes)
			if err != nil {
				return err
			}
			if w+k > have {
				break
			}
			pkt, reason, next, err := wire.DecodeRewindFrame(buf[w : w+k])
			if err != nil {
				return err
			}
			if pkt == nil {
				if w > 0 {
					rw.push(buf, w)
				}
				return fmt.Errorf("the replayer ended the stream before seq %d (reason %d)", next, reason)
			}
			w += k
		}
		if w > 0 {
			var nb []byte
			select {
			case nb = <-rw.free:
			case <-rw.stop:
				return nil
			}
			have = copy(nb, buf[w:have])
			rw.push(buf, w)
			buf = nb
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return errors.New("the replayer closed the connection")
			}
			return rerr
		}
	}
}

func (rw *rewindStream) push(b []byte, n int) {
	rw.full <- rewindChunk{b: b, n: n}
	if rw.wake != nil {
		rw.wake()
	}
}
