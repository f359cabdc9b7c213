package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/internal/epoll"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/transport"
)

// conn is one TCP connection of an endpoint. The endpoint's Poll reads it
// (see poller), or, for a connection with no file descriptor (a test's
// wrapper), a reader goroutine copies its frames into the endpoint's
// inbox; a writer goroutine writes what Flush hands it, so a stalled peer
// blocks only its own writer.
//
// Direct writes: when the writer is idle (nothing queued or being
// written), enqueue may first offer the frames to the socket from the
// calling goroutine, in one non-blocking write(2); whatever the socket does
// not take goes to the writer as before. A round trip then skips two
// goroutine hand-offs (a wake of the writer on each side), the largest
// cost of TCP's latency over UDP's.
//
// Send queue: three buffers rotate. The endpoint goroutine appends frames
// to out (no lock); Flush moves out into queued under mu and wakes the
// writer; the writer swaps queued with its own buffer and writes it with
// one Write call. Each buffer grows to the largest burst and is kept.
type conn struct {
	nc   net.Conn  // as accepted or dialled; read by readLoop if not polled
	file *os.File  // nc's socket out of the netpoller (see detach), or nil
	w    io.Writer // file or nc: the writer goroutine's
	cl   io.Closer // file or nc
	// remote is the peer's address, for logs.
	remote string
	peer   transport.Peer
	ep     *endpoint // counters and the rate-limited log of closes
	slot   int32     // Server only: index in Server.slots

	bufBytes int    // initial capacity of each send buffer
	out      []byte // owned by the endpoint goroutine (Server only; a Client keeps its own)
	// Server only, endpoint goroutine: pubFrom is where this
	// connection's share of Server.pub starts (everything in pub before
	// it is already in out, or was published before it joined); seen is
	// set once refresh has picked it up.
	pubFrom int
	seen    bool

	mu       sync.Mutex
	queued   []byte // flushed, waiting for the writer
	inflight int    // bytes the writer is writing now

	// Direct writes (mu held): raw is the socket (nil: no direct
	// writes); writeOnce is its method value, built once, writing wbuf
	// and leaving the count in wn.
	raw       syscall.RawConn
	writeOnce func(fd uintptr) bool
	wbuf      []byte
	wn        int

	// Polled reads, for a connection with a file descriptor (set by
	// newConn; then endpoint goroutine only): fr splits what readNow
	// reads (readOnce is its method value, built once) into frames; rn
	// and rerr are the last read's result.
	polled   bool
	fr       *frameReader
	readOnce func(fd uintptr) bool
	rn       int
	rerr     error

	// written counts bytes the socket took (the writer's progress).
	// stalling, stallSince and stallWritten belong to the endpoint
	// goroutine: since when the connection holds more than
	// SlowClientBytes with written stuck at stallWritten.
	written      atomic.Uint64
	stalling     bool
	stallSince   int64
	stallWritten uint64

	wake chan struct{} // cap 1: Flush -> writer
	done chan struct{} // closed by kill

	dead     atomic.Bool
	killOnce sync.Once
	reason   error // why the connection ended; set once by kill
}

func newConn(nc net.Conn, peer transport.Peer, cfg Config, ep *endpoint) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Frames are small and latency matters; batching is done by Flush.
		_ = tc.SetNoDelay(true)
	}
	c := &conn{
		nc:       nc,
		peer:     peer,
		ep:       ep,
		bufBytes: cfg.WriteBufferBytes,
		out:      make([]byte, 0, cfg.WriteBufferBytes),
		queued:   make([]byte, 0, cfg.WriteBufferBytes),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	c.w, c.cl, c.remote = nc, nc, nc.RemoteAddr().String()
	var sc syscall.Conn
	if tc, ok := nc.(*net.TCPConn); ok {
		if f, err := detach(tc); err == nil {
			c.file, c.w, c.cl, sc = f, f, f, f
		}
	} else if s, ok := nc.(syscall.Conn); ok {
		sc = s
	}
	if sc != nil {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
			c.writeOnce = c.writeNow
			c.polled = true
			c.fr = newFrameReader(cfg.ReadBufferBytes, cfg.MaxFrameBytes)
			c.readOnce = c.readNow
		}
	}
	return c
}

// detach takes tc's socket out of Go's netpoller: it returns a blocking
// duplicate of it, as a file the netpoller does not watch, and closes tc.
// Every segment and every ACK to a socket in the netpoller wakes the
// runtime's polling thread (edge-triggered, for reads and for write room
// alike), though no goroutine waits on it: 2.8 wake-ups per round trip
// on top of Poll's own, on a machine where the two ends already share two
// cores. Poll reads and Flush writes without waiting (MSG_DONTWAIT,
// readNow and writeNow); only the writer goroutine blocks, in write(2),
// while a peer does not read, and kill's shutdown(2) ends that.
func detach(tc *net.TCPConn) (*os.File, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	dup := -1
	var derr error
	if err := raw.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	// Blocking: os.NewFile leaves a blocking descriptor out of the
	// netpoller. (The flag is the socket's, shared with tc's descriptor,
	// which is closed next and never used again.)
	if err := unix.SetNonblock(dup, false); err != nil {
		unix.Close(dup)
		return nil, err
	}
	_ = tc.Close()
	return os.NewFile(uintptr(dup), "tcp"), nil
}

// register adds c's socket to its endpoint's poller (and notifier, if
// any) with key (lo, hi), for Poll to read. It is a no-op for a
// connection with no file descriptor (a test's wrapper: a reader
// goroutine reads it, see readLoop), and fails if c is closed.
func (c *conn) register(lo, hi int32) error {
	if !c.polled {
		return nil
	}
	var err error
	if cerr := c.raw.Control(func(fd uintptr) {
		if err = c.ep.poller.Add(int(fd), lo, hi); err == nil {
			if n := c.ep.notifier.Load(); n != nil {
				err = n.Add(int(fd), lo, hi)
			}
		}
	}); cerr != nil {
		return cerr
	}
	if errors.Is(err, epoll.ErrClosed) {
		return transport.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	return nil
}

// readNow is readOnce: one read(2) into fr's free room, never waiting
// (the socket is non-blocking; returning true tells the runtime not to
// wait for it to be readable: the poller waits instead).
func (c *conn) readNow(fd uintptr) bool {
	b := c.fr.room()
	n, _, e := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		syscall.MSG_DONTWAIT, 0, 0)
	c.rn, c.rerr = int(n), nil
	if e != 0 {
		c.rn, c.rerr = 0, e
	}
	return true
}

// readOnceNow reads what the socket holds into fr, once, on the
// endpoint's goroutine. It reports whether frames may have arrived, and
// kills the connection on end of stream or an error. EAGAIN (a stale or
// spurious event) is nothing read.
func (c *conn) readOnceNow() bool {
	if c.dead.Load() {
		return false
	}
	c.rn, c.rerr = 0, nil
	if err := c.raw.Read(c.readOnce); err != nil {
		c.kill(err)
		return false
	}
	switch {
	case c.rerr == syscall.EAGAIN || c.rerr == syscall.EINTR:
		return false
	case c.rerr != nil:
		c.kill(c.rerr)
		return false
	case c.rn <= 0:
		c.kill(io.EOF)
		return false
	}
	c.fr.end += c.rn
	return true
}

// unpoll takes c out of the endpoint's pollers before its socket is
// closed, so that no event of it is reported after (kill).
func (c *conn) unpoll() {
	if !c.polled {
		return
	}
	p, n := c.ep.poller, c.ep.notifier.Load()
	_ = c.raw.Control(func(fd uintptr) {
		if p != nil {
			p.Del(int(fd))
		}
		if n != nil {
			n.Del(int(fd))
		}
		if c.file != nil {
			// Ends a write blocked in the writer (see detach).
			_ = unix.Shutdown(int(fd), unix.SHUT_RDWR)
		}
	})
}

// writeNow is writeOnce: one write(2) of wbuf, never waiting (the socket
// is non-blocking; returning true tells the runtime not to wait for it
// to drain). Any error, EAGAIN included, counts as nothing written: the
// writer then writes it all and meets the error itself.
func (c *conn) writeNow(fd uintptr) bool {
	n, _, e := syscall.Syscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&c.wbuf[0])), uintptr(len(c.wbuf)),
		syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
	if e != 0 || int(n) < 0 {
		n = 0
	}
	c.wn = int(n)
	return true
}

// enqueue hands the frames in *out, then those in shared, to the writer
// and leaves *out empty (an emptied buffer of the rotation). shared is
// the caller's (Server.pub, the frames published to every connection):
// what the socket does not take at once is copied. It reports the bytes
// now waiting to be written, including those being written, so the
// caller can detect a slow peer.
//
// With direct, and the writer idle, the caller's goroutine first writes
// what the socket takes at once (see conn); the rest goes to the writer.
func (c *conn) enqueue(out *[]byte, shared []byte, direct bool) (pending int) {
	if len(*out) == 0 && len(shared) == 0 {
		return 0
	}
	c.mu.Lock()
	if direct && c.raw != nil && len(c.queued) == 0 && c.inflight == 0 && !c.dead.Load() {
		// The writer writes only with inflight set, under mu: nothing
		// else writes to the socket now.
		if n := c.writeDirect(*out); n < len(*out) {
			// The socket is full: the writer takes the rest, from the
			// front of the buffer.
			rest := copy(*out, (*out)[n:])
			*out = (*out)[:rest]
		} else {
			*out = (*out)[:0]
			shared = shared[c.writeDirect(shared):]
		}
		if len(*out) == 0 && len(shared) == 0 {
			c.mu.Unlock()
			return 0
		}
	}
	if len(c.queued) == 0 {
		c.queued, *out = *out, c.queued[:0]
	} else {
		c.queued = append(c.queued, *out...)
		*out = (*out)[:0]
	}
	c.queued = append(c.queued, shared...)
	pending = len(c.queued) + c.inflight
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return pending
}

// writeDirect writes what the socket takes of b at once, from the
// caller's goroutine (c.mu held, the writer idle), and returns the count.
func (c *conn) writeDirect(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	c.wbuf, c.wn = b, 0
	_ = c.raw.Write(c.writeOnce)
	n := c.wn
	c.wbuf = nil
	c.written.Add(uint64(n))
	return n
}

// writeChunkBytes is the most one Write call of writeLoop takes.
const writeChunkBytes = 512 << 10

// clockBase makes monoNow a reading of the monotonic clock.
var clockBase = time.Now()

func monoNow() int64 { return int64(time.Since(clockBase)) }

// tooSlow reports whether a connection holding pending bytes not yet
// written must be closed: beyond MaxQueueBytes at once; beyond
// SlowClientBytes once its writes made no progress for SlowClientTimeout.
// A peer that reads is never cut for a burst below MaxQueueBytes. It reads
// the clock only above SlowClientBytes. Endpoint goroutine only.
func (c *conn) tooSlow(pending int, cfg *Config) bool {
	switch {
	case pending > cfg.MaxQueueBytes:
		return true
	case pending <= cfg.SlowClientBytes:
		c.stalling = false
		return false
	}
	now := monoNow()
	if w := c.written.Load(); !c.stalling || w != c.stallWritten {
		c.stalling, c.stallSince, c.stallWritten = true, now, w
		return false
	}
	return now-c.stallSince > int64(cfg.SlowClientTimeout)
}

// writeLoop writes what enqueue hands over until the connection dies. A
// failed write ends this connection only (counted in Drops.WriteFailures):
// its peer reconnects and repairs, the endpoint goes on.
func (c *conn) writeLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	writing := make([]byte, 0, c.bufBytes)
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		writing, c.queued = c.queued, writing[:0]
		c.inflight = len(writing)
		c.mu.Unlock()
		if len(writing) == 0 {
			continue
		}
		// In chunks, so that the endpoint sees progress (tooSlow) while
		// a large burst is being written to a peer that reads.
		var err error
		for p := writing; len(p) > 0 && err == nil; {
			var n int
			n, err = c.w.Write(p[:min(len(p), writeChunkBytes)])
			c.written.Add(uint64(n))
			p = p[n:]
		}
		c.mu.Lock()
		c.inflight = 0
		c.mu.Unlock()
		if err != nil {
			if !c.dead.Load() && !isOrdinaryEnd(err) {
				c.ep.writeFailed.Add(1)
			}
			c.kill(err)
			return
		}
	}
}

// readLoop copies frames from the socket into q until the connection dies
// or q closes. Frames parsed from one read are pushed under one lock.
func (c *conn) readLoop(q *inbox, fr *frameReader) {
	e := c.ep
	for {
		if _, err := fr.fill(c.nc); err != nil {
			if tlsconf.IsRemoteAlert(err) {
				// TLS 1.3: a server that refused this client's
				// certificate says so only at the first read.
				err = fmt.Errorf("%w: %w", ErrHandshake, tlsconf.Explain(c.remote, err))
			}
			c.kill(err)
			return
		}
		q.mu.Lock()
		for {
			frame, err := fr.next()
			if err != nil {
				q.mu.Unlock()
				q.signal()
				e.oversized.Add(1)
				c.kill(err)
				return
			}
			if frame == nil {
				break
			}
			if e.auth != nil {
				n, ok := e.verify(c, frame)
				if !ok {
					q.mu.Unlock()
					q.signal()
					return
				}
				frame = frame[:n]
			}
			if !q.pushLocked(c.peer, frame) {
				q.mu.Unlock()
				c.kill(transport.ErrClosed)
				return
			}
		}
		q.mu.Unlock()
		q.signal()
	}
}

// kill closes the connection once and logs why (rate-limited: one line
// per interval for all of the endpoint's connections), unless the reason
// is an ordinary end (the peer hung up, or we closed).
func (c *conn) kill(reason error) {
	c.killOnce.Do(func() {
		c.reason = reason
		c.dead.Store(true)
		close(c.done)
		c.unpoll()
		_ = c.cl.Close()
		if !isOrdinaryEnd(reason) {
			c.ep.closes.Note(1, fmt.Errorf("peer %d (%s): %w", uint32(c.peer), c.remote, reason))
		}
	})
}

func isOrdinaryEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, transport.ErrClosed)
}
