package tcp

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
)

// poller is an endpoint's own epoll set: its connections' sockets and an
// eventfd. Poll waits in epoll_wait on the endpoint's goroutine and then
// reads the sockets that are ready itself, so that a frame reaches the
// handler with no goroutine hand-off: a reader goroutine per connection
// handing frames over (a wake of the reader by the runtime's netpoller,
// then of the polling goroutine) cost most of TCP's round trip over
// UDP's. Go's netpoller cannot wait on many sockets from one goroutine;
// epoll_wait parks only the polling goroutine's thread, and only when
// nothing is ready. (package multicast waits the same way.)
//
// An event carries the connection's key (a Server's slot and generation,
// a Client's source index), never a file descriptor, so an event of a
// closed connection is recognised as stale and never reaches the socket
// that reused its number.
//
// Level-triggered (Poll's set): a socket with data left unread is
// reported again by the next wait, so Poll may read a bounded amount per
// call. Edge-triggered (a Server's notifier for package hybrid): each
// arrival is reported once, so a goroutine can wait on it and signal
// without spinning while the data waits for Poll.
//
// Wakes coalesce as in package multicast: armed is set by the wake that
// writes the eventfd and cleared by the wait that reads it.
type poller struct {
	epfd, evfd int
	et         bool
	events     [pollEvents]unix.EpollEvent
	armed      atomic.Bool

	// mu is held (read) to change the set or write the eventfd, and
	// (write) to close them: a descriptor number is never used after
	// close, when it may be another file's.
	mu     sync.RWMutex
	closed bool
}

// pollEvents is the most sockets one wait reports; level-triggered, the
// others are reported by the next.
const pollEvents = 64

func newPoller(edgeTriggered bool) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tcp: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("tcp: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("tcp: epoll_ctl: %w", err)
	}
	return &poller{epfd: epfd, evfd: evfd, et: edgeTriggered}, nil
}

// key is what an event carries: a connection's key, split in two halves
// (the event's Fd and Pad fields). The eventfd's key has hi -1.
func eventKey(ev *unix.EpollEvent) (lo, hi int32) { return ev.Pad, ev.Fd }

// add puts fd in the set, labelled with key (lo, hi >= 0).
func (p *poller) add(fd int, lo, hi int32) error {
	flags := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if p.et {
		flags |= unix.EPOLLET
	}
	ev := unix.EpollEvent{Events: flags, Fd: hi, Pad: lo}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return transport.ErrClosed
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("tcp: epoll_ctl add: %w", err)
	}
	return nil
}

// del takes fd out of the set (the caller still holds fd open).
func (p *poller) del(fd int) {
	p.mu.RLock()
	if !p.closed {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	p.mu.RUnlock()
}

// wait blocks until a socket is ready, d passes (rounded up to a
// millisecond, epoll's unit; d < 0 waits for ever) or wake is called. It
// returns the sockets' events (not the eventfd's) and whether a wake
// came. The caller holds the endpoint's poll lock (close waits for it).
func (p *poller) wait(d time.Duration) (events []unix.EpollEvent, woken bool, err error) {
	ms := -1
	if d >= 0 {
		ms = int(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	n, err := unix.EpollWait(p.epfd, p.events[:], ms)
	if err == unix.EINTR {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("tcp: epoll_wait: %w", err)
	}
	k := 0
	for i := range n {
		if p.events[i].Fd == -1 {
			// Reset the eventfd's counter (or it stays readable), then
			// let the next wake write again.
			var b [8]byte
			_, _ = unix.Read(p.evfd, b[:])
			p.armed.Store(false)
			woken = true
			continue
		}
		p.events[k] = p.events[i]
		k++
	}
	return p.events[:k], woken, nil
}

// wake makes a current or later wait return woken; safe from any
// goroutine. It writes the eventfd only if no write is outstanding.
func (p *poller) wake() {
	if p.armed.Load() || p.armed.Swap(true) {
		return
	}
	p.writeEventfd()
}

// forceWake writes the eventfd whatever armed says (Close: the wait must
// return even if a wake's write is still on its way).
func (p *poller) forceWake() {
	p.armed.Store(true)
	p.writeEventfd()
}

func (p *poller) writeEventfd() {
	one := [8]byte{1}
	p.mu.RLock()
	if !p.closed {
		_, _ = unix.Write(p.evfd, one[:])
	}
	p.mu.RUnlock()
}

// close releases the set; the caller holds the endpoint's poll lock, so
// no wait is in progress. Later adds fail, later wakes and dels do nothing.
func (p *poller) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		unix.Close(p.evfd)
		unix.Close(p.epfd)
	}
	p.mu.Unlock()
}
