package multicast

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// poller waits, without spinning, until any of an endpoint's sockets is
// readable or Close wakes it: an epoll set holding the sockets and an
// eventfd. Go's own netpoller cannot wait on two sockets from one
// goroutine, and a goroutine per socket would add a hand-off (and a copy)
// per datagram; epoll_wait parks only the polling goroutine's thread, and
// only when there is nothing to read.
//
// Wakes coalesce: armed is set by the wake that writes the eventfd and
// cleared by the wait that reads it, so however many wakes come while the
// poller is busy, at most one write is outstanding (a sending node wakes
// its Run loop once per Poll, not once per Send). The wait reads the
// eventfd before it clears armed, so a wake that finds armed set always
// has a write ahead of it that a wait has yet to read, or that the
// current wait read after the wake's work was queued: a wake is never lost.
type poller struct {
	epfd, evfd int
	events     [4]unix.EpollEvent
	ready      int // events[:ready] are the last wait's
	armed      atomic.Bool
	writes     atomic.Uint64 // eventfd writes (tests)
}

func newPoller(fds ...int) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("multicast: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("multicast: eventfd: %w", err)
	}
	p := &poller{epfd: epfd, evfd: evfd}
	for _, fd := range append(fds, evfd) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			p.close()
			return nil, fmt.Errorf("multicast: epoll_ctl: %w", err)
		}
	}
	return p, nil
}

// wait blocks until a socket is readable, d passes (rounded up to a
// millisecond, epoll's unit) or wake is called; it reports the wake, and
// timedOut when d passed with nothing ready (the caller need not look).
func (p *poller) wait(d time.Duration) (woken, timedOut bool, err error) {
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	if ms > math.MaxInt32 {
		ms = math.MaxInt32
	}
	n, err := unix.EpollWait(p.epfd, p.events[:], int(ms))
	p.ready = max(n, 0)
	if err == unix.EINTR {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	if n == 0 {
		return false, true, nil
	}
	for i := range n {
		if int(p.events[i].Fd) == p.evfd {
			// Reset the eventfd's counter, or epoll reports it
			// readable forever and every later wait returns at once;
			// then let the next wake write again.
			var b [8]byte
			_, _ = unix.Read(p.evfd, b[:])
			p.armed.Store(false)
			return true, false, nil
		}
	}
	return false, false, nil
}

// readable reports whether the last wait found fd readable.
func (p *poller) readable(fd int) bool {
	for i := range p.ready {
		if int(p.events[i].Fd) == fd {
			return true
		}
	}
	return false
}

// wake makes a current or later wait return woken; safe from any
// goroutine. It writes the eventfd only if no write is outstanding.
func (p *poller) wake() {
	if p.armed.Load() || p.armed.Swap(true) {
		return
	}
	p.writes.Add(1)
	one := [8]byte{1}
	_, _ = unix.Write(p.evfd, one[:])
}

// forceWake writes the eventfd whatever armed says (Close: the wait must
// return even if a wake's write is still on its way).
func (p *poller) forceWake() {
	p.armed.Store(true)
	one := [8]byte{1}
	_, _ = unix.Write(p.evfd, one[:])
}

func (p *poller) close() {
	unix.Close(p.evfd)
	unix.Close(p.epfd)
}
