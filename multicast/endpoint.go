package multicast

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/internal/epoll"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// maxRounds bounds the batches read from each socket in one Poll, so a
// flooded endpoint still returns to its caller's other work.
const maxRounds = 4

// pollEvents is the most sockets one wait reports (an endpoint has at
// most a few).
const pollEvents = 4

// endpoint is what Server and Client share: receive sockets polled
// together, one sending socket with its queue, counters and Close.
//
// Lock order: pollMu, then the poller's own. Poll and Close hold pollMu
// while they touch raw file descriptors (recvmmsg, epoll), so Close cannot
// close an fd that Poll is using and the kernel cannot hand its number to
// someone else under Poll's feet. Close first wakes the poller, so a Poll
// parked in epoll_wait returns and lets go of pollMu at once; the poller
// keeps a Wake from writing its eventfd once it is closed.
type endpoint struct {
	cfg     *resolved
	role    string
	rx      []*receiver
	sockets []*socket // every socket, closed by Close
	sender  *socket
	out     *sendQueue
	// poller waits until a receive socket is readable or Wake is
	// called: Go's netpoller cannot wait on two sockets from one
	// goroutine, and a goroutine per socket would add a hand-off (and a
	// copy) per datagram. A socket's key is (0, its fd).
	poller *epoll.Set

	pollMu sync.Mutex
	// drainFirst: the last read left a full batch, so the next Poll reads
	// before it asks epoll (pollMu).
	drainFirst bool
	closed     atomic.Bool

	// Counters published after each batch, so Counters may be read from
	// another goroutine (metrics) without a race.
	framesSent, bytesSent, framesRecv, bytesRecv, dropped, refused atomic.Uint64
	// authFailed counts received datagrams that failed authentication,
	// by the kind their prefix claims (AuthFailures).
	authFailed wire.AuthFailureCounts

	// refusals logs refused datagrams, at most one line per interval.
	refusals transport.RateLog
}

func (e *endpoint) init() error {
	e.refusals = transport.RateLog{
		Logger: e.cfg.Logger, Msg: "multicast: datagrams refused by the kernel (counted as loss)",
		Attrs: []any{"role", e.role, "local", e.sender.local.String()},
	}
	p, err := epoll.New(epoll.Config{MaxEvents: pollEvents})
	if err != nil {
		return fmt.Errorf("multicast: %w", err)
	}
	for _, r := range e.rx {
		if err := p.Add(r.s.fd, 0, int32(r.s.fd)); err != nil {
			p.Close()
			return fmt.Errorf("multicast: %w", err)
		}
	}
	e.poller = p
	return nil
}

// queue adds frame for to. Only a closed endpoint is an error: datagrams
// the kernel refuses are loss, counted and logged (see sendQueue.flush).
func (e *endpoint) queue(frame []byte, to *net.UDPAddr) error {
	if e.closed.Load() {
		return transport.ErrClosed
	}
	err := e.out.add(frame, to)
	e.publishSent()
	return e.mapErr(err)
}

// Flush hands every queued frame to the kernel. Datagrams the kernel
// refuses are counted in Counters().Refused and logged, rate-limited; they
// do not make Flush fail, which returns only transport.ErrClosed.
func (e *endpoint) Flush() error {
	if e.closed.Load() {
		return transport.ErrClosed
	}
	if e.out.n == 0 {
		return nil
	}
	err := e.out.flush()
	e.publishSent()
	return e.mapErr(err)
}

// mapErr maps the error of a send. The send queue returns only the
// socket's own error, which means it is closed (by Close, or under us).
func (e *endpoint) mapErr(err error) error {
	if err != nil && (e.closed.Load() || errors.Is(err, net.ErrClosed)) {
		return transport.ErrClosed
	}
	return err
}

func (e *endpoint) publishSent() {
	q := e.out
	if q.frames|q.bytes|q.failed|q.refused != 0 {
		e.framesSent.Add(q.frames)
		e.bytesSent.Add(q.bytes)
		e.dropped.Add(q.failed)
		if q.refused != 0 {
			e.refused.Add(q.refused)
			e.refusals.Note(q.refused, q.lastRefusal)
		}
		q.frames, q.bytes, q.failed, q.refused = 0, 0, 0, 0
	}
}

// Poll hands every frame that has arrived to h, waiting up to wait for the
// first; see transport.Server.Poll.
func (e *endpoint) Poll(h transport.Handler, wait time.Duration) (int, error) {
	e.pollMu.Lock()
	n, err := e.pollLocked(h, wait)
	e.pollMu.Unlock()
	return n, err
}

func (e *endpoint) pollLocked(h transport.Handler, wait time.Duration) (int, error) {
	// Output goes first, even for wait 0: callers queue and then poll, and
	// replies should not sit in the queue while we read.
	if e.out.n > 0 && !e.closed.Load() {
		if err := e.Flush(); err != nil {
			return 0, err
		}
	}
	if e.closed.Load() {
		return 0, transport.ErrClosed
	}
	// Read the sockets first when there is likely more to read (the last
	// read filled a batch), when the caller will not wait, or when a fault
	// injector may hold a datagram back (it is released when a socket is
	// found empty). Otherwise ask epoll first: it returns at once if a
	// socket is readable and says which, and an idle endpoint pays one
	// system call per wait instead of one per socket more.
	if e.drainFirst || wait <= 0 || e.cfg.Faults.Enabled() {
		n, err := e.drain(h, false)
		if n > 0 || err != nil || wait <= 0 {
			return n, err
		}
	}
	deadline := time.Now().Add(wait)
	for {
		_, woken, timedOut, err := e.poller.Wait(wait)
		if e.closed.Load() {
			return 0, transport.ErrClosed
		}
		if err != nil {
			return 0, fmt.Errorf("multicast: %s poll: %w", e.role, err)
		}
		if timedOut {
			// Nothing arrived in the whole wait (epoll rounds it up):
			// no need to look at the sockets again.
			return 0, nil
		}
		n, err := e.drain(h, !woken)
		if n > 0 || err != nil || woken {
			return n, err // a Wake goes back to the caller, frames or not
		}
		// Readable but nothing delivered (a datagram dropped as too
		// long, or by faults): wait for the rest of the time.
		if wait = time.Until(deadline); wait <= 0 {
			return 0, nil
		}
	}
}

// drain reads what is available without blocking and returns the frames
// delivered: from every socket, or with onlyReady from those the poller's
// last wait found readable. A socket that filled its batch is read again,
// up to maxRounds batches.
func (e *endpoint) drain(h transport.Handler, onlyReady bool) (int, error) {
	var delivered uint64
	if onlyReady {
		for _, r := range e.rx {
			r.again = e.poller.Reported(0, int32(r.s.fd))
		}
	} else {
		for _, r := range e.rx {
			r.again = true
		}
	}
	e.drainFirst = false
	for round := 0; round < maxRounds; round++ {
		more := false
		for _, r := range e.rx {
			if !r.again {
				continue
			}
			before, drops := r.frames, r.faultDrops()
			k, err := r.read(h)
			if k == 0 {
				r.release(h) // idle: a held-back datagram goes now
			}
			r.again = k == r.vlen
			more = more || r.again
			delivered += r.frames - before
			e.framesRecv.Add(r.frames - before)
			e.bytesRecv.Add(r.bytes)
			r.bytes = 0
			e.dropped.Add(r.faultDrops() - drops + r.truncated)
			r.truncated = 0
			if r.auth != nil {
				for k, n := range r.authFailed {
					if n != 0 {
						e.authFailed.Add(k, n)
						r.authFailed[k] = 0
					}
				}
			}
			if err != nil {
				e.drainFirst = true
				return int(delivered), fmt.Errorf("multicast: %s recvmmsg: %w", e.role, err)
			}
		}
		if !more {
			break
		}
	}
	// A batch still full after maxRounds: more is waiting.
	for _, r := range e.rx {
		e.drainFirst = e.drainFirst || r.again
	}
	return int(delivered), nil
}

// Counters returns the endpoint's totals; safe from any goroutine.
// Dropped counts datagrams discarded by fault injection, datagrams longer
// than MaxDatagramBytes, and replies to peers that are unknown or no
// longer in the peer table; Refused counts datagrams the kernel refused
// to send.
func (e *endpoint) Counters() transport.Counters {
	return transport.Counters{
		FramesSent:     e.framesSent.Load(),
		FramesReceived: e.framesRecv.Load(),
		BytesSent:      e.bytesSent.Load(),
		BytesReceived:  e.bytesRecv.Load(),
		Dropped:        e.dropped.Load(),
		Refused:        e.refused.Load(),
		AuthFailed:     e.authFailed.Total(),
	}
}

// AuthFailures returns the received datagrams that failed authentication
// and were dropped, by the kind their prefix claims (wire.AuthFailureCounts).
// Safe from any goroutine.
func (e *endpoint) AuthFailures() [8]uint64 { return e.authFailed.ByKind() }

// MaxFrameBytes is the largest frame carried (MaxDatagramBytes).
func (e *endpoint) MaxFrameBytes() int { return e.cfg.MaxDatagramBytes }

// Close releases the sockets and makes a Poll blocked in another goroutine
// return transport.ErrClosed. It is safe from any goroutine, more than once.
func (e *endpoint) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.poller.ForceWake()
	e.pollMu.Lock()
	for _, s := range e.sockets {
		s.close()
	}
	e.poller.Close()
	e.pollMu.Unlock()
	return nil
}

// Granted returns the receive and send buffer sizes the kernel granted
// (as getsockopt reports them: Linux doubles the size asked for, to count
// its bookkeeping, so a granted value below the one asked means capped).
func (e *endpoint) Granted() (rcv, snd int) {
	return e.rx[0].s.rcvGranted, e.sender.sndGranted
}

// SocketInfo describes the endpoint in one line for a shell to log at start,
// with the fix when the kernel capped the buffers.
func (e *endpoint) SocketInfo() string {
	c := e.cfg
	rcv, snd := e.Granted()
	s := fmt.Sprintf("multicast %s: stream %s, commands %s, interface %s, ttl %d, loopback %t, batch %d, max datagram %d B, SO_RCVBUF %d (asked %d), SO_SNDBUF %d (asked %d), local %s",
		e.role, c.StreamGroup, c.CommandGroup, c.Interface, c.TTL, c.Loopback, c.BatchSize, c.MaxDatagramBytes,
		rcv, c.ReadBufferBytes, snd, c.WriteBufferBytes, e.sender.local)
	s += ", gso " + e.gsoState() + ", gro " + e.groState()
	if c.Faults.Enabled() {
		s += ", faults " + c.Faults.String()
	}
	if rcv < c.ReadBufferBytes {
		s += fmt.Sprintf("; kernel capped SO_RCVBUF at %d: raise net.core.rmem_max (sysctl -w net.core.rmem_max=%d) or run with CAP_NET_ADMIN", rcv, c.ReadBufferBytes)
	}
	if snd < c.WriteBufferBytes {
		s += fmt.Sprintf("; kernel capped SO_SNDBUF at %d: raise net.core.wmem_max (sysctl -w net.core.wmem_max=%d) or run with CAP_NET_ADMIN", snd, c.WriteBufferBytes)
	}
	return s
}

// gsoState says whether sends use UDP GSO, and why not if the kernel
// refused it.
func (e *endpoint) gsoState() string {
	if !e.cfg.GSO {
		return "off"
	}
	if errno := unix.Errno(e.out.gsoOff.Load()); errno != 0 {
		return fmt.Sprintf("off (kernel refused: %v; %d messages resent without it)", errno, e.out.gsoFallbacks.Load())
	}
	return "on"
}

// groState says whether receives use UDP GRO, and why not if the kernel
// refused it.
func (e *endpoint) groState() string {
	if !e.cfg.GRO {
		return "off"
	}
	for _, r := range e.rx {
		if r.groErr != nil {
			return fmt.Sprintf("off (kernel refused: %v)", r.groErr)
		}
	}
	return "on"
}
