package epoll

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Set is an endpoint's own epoll set: its sockets and an eventfd.
//
// An event carries the key its socket was added with (two int32 halves,
// the event's Fd and Pad fields), never a file descriptor of its own
// choosing: a caller whose sockets come and go (package tcp) uses a key
// with a generation, so an event of a closed socket is recognised as
// stale and never reaches the socket that reused its number. The
// eventfd's key has hi -1, so socket keys have hi >= 0.
//
// Level-triggered (the default): a socket with data left unread is
// reported again by the next wait, so a caller may read a bounded amount
// per call. Edge-triggered (Config.EdgeTriggered): each arrival is
// reported once, so a goroutine can wait on it and signal without
// spinning while the data waits for someone else to read it.
//
// Wakes coalesce: armed is set by the wake that writes the eventfd and
// cleared by the wait that reads it, so however many wakes come while the
// waiter is busy, at most one write is outstanding (a sending node wakes
// its Run loop once per Poll, not once per Send). The wait reads the
// eventfd before it clears armed, so a wake that finds armed set always
// has a write ahead of it that a wait has yet to read, or that the
// current wait read after the wake's work was queued: a wake is never
// lost.
type Set struct {
	epfd, evfd int
	flags      uint32 // of every socket added
	events     []unix.EpollEvent
	ready      int // events[:ready] are the last wait's sockets
	armed      atomic.Bool
	writes     atomic.Uint64 // eventfd writes by Wake (tests)
	counter    [8]byte       // the eventfd's counter, read by Wait

	// mu is held (read) to change the set or write the eventfd, and
	// (write) to close them: a descriptor number is never used after
	// close, when it may be another file's.
	mu     sync.RWMutex
	closed bool
}

// Config says how a Set reports its sockets.
type Config struct {
	// MaxEvents is the most sockets one Wait reports (at least 1);
	// level-triggered, the others are reported by the next.
	MaxEvents int
	// EdgeTriggered reports each arrival once (EPOLLET) instead of
	// while the socket stays readable.
	EdgeTriggered bool
	// HangUp also reports a peer's shutdown of its sending half
	// (EPOLLRDHUP), for stream sockets: the reader then sees the end.
	HangUp bool
}

// New makes an empty Set (its eventfd only).
func New(cfg Config) (*Set, error) {
	if cfg.MaxEvents < 1 {
		return nil, fmt.Errorf("epoll: MaxEvents %d, want at least 1", cfg.MaxEvents)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	s := &Set{epfd: epfd, evfd: evfd, flags: unix.EPOLLIN, events: make([]unix.EpollEvent, cfg.MaxEvents)}
	if cfg.HangUp {
		s.flags |= unix.EPOLLRDHUP
	}
	if cfg.EdgeTriggered {
		s.flags |= unix.EPOLLET
	}
	return s, nil
}

// Key is what an event carries: the key its socket was added with.
func Key(ev *unix.EpollEvent) (lo, hi int32) { return ev.Pad, ev.Fd }

// Add puts fd in the set, labelled with key (lo, hi >= 0). It returns
// ErrClosed once the set is closed.
func (s *Set) Add(fd int, lo, hi int32) error {
	ev := unix.EpollEvent{Events: s.flags, Fd: hi, Pad: lo}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add: %w", err)
	}
	return nil
}

// Del takes fd out of the set (the caller still holds fd open).
func (s *Set) Del(fd int) {
	s.mu.RLock()
	if !s.closed {
		_ = unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	s.mu.RUnlock()
}

// Wait blocks until a socket is ready, d passes (rounded up to a
// millisecond, epoll's unit; d < 0 waits for ever) or Wake is called. It
// returns the sockets' events (not the eventfd's; valid until the next
// Wait), whether a wake came, and timedOut when d passed with nothing
// ready (the caller need not look at its sockets). A wait interrupted by
// a signal returns nothing, neither woken nor timed out. The error is
// epoll_wait's own (the caller says which endpoint's).
func (s *Set) Wait(d time.Duration) (events []unix.EpollEvent, woken, timedOut bool, err error) {
	ms := -1
	if d >= 0 {
		ms = int(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	n, err := unix.EpollWait(s.epfd, s.events, ms)
	s.ready = 0
	if err == unix.EINTR {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, err
	}
	if n == 0 {
		return nil, false, true, nil
	}
	k := 0
	for i := range n {
		if s.events[i].Fd == -1 {
			// Reset the eventfd's counter, or epoll reports it
			// readable forever and every later wait returns at once;
			// then let the next wake write again.
			_, _ = unix.Read(s.evfd, s.counter[:])
			s.armed.Store(false)
			woken = true
			continue
		}
		s.events[k] = s.events[i]
		k++
	}
	s.ready = k
	return s.events[:k], woken, false, nil
}

// Reported reports whether the last Wait reported the socket of key
// (lo, hi).
func (s *Set) Reported(lo, hi int32) bool {
	for i := range s.ready {
		if s.events[i].Pad == lo && s.events[i].Fd == hi {
			return true
		}
	}
	return false
}

// Wake makes a current or later Wait return woken; safe from any
// goroutine. It writes the eventfd only if no write is outstanding, so a
// wake that rides on an outstanding one costs an atomic load.
func (s *Set) Wake() {
	if s.armed.Load() || s.armed.Swap(true) {
		return
	}
	s.writes.Add(1)
	s.writeEventfd()
}

// ForceWake writes the eventfd whatever armed says (Close: the wait must
// return even if a wake's write is still on its way).
func (s *Set) ForceWake() {
	s.armed.Store(true)
	s.writeEventfd()
}

// one is what a wake adds to the eventfd's counter (a variable, not a
// local: under -race a local handed to write(2) escapes to the heap).
var one = [8]byte{1}

func (s *Set) writeEventfd() {
	s.mu.RLock()
	if !s.closed {
		_, _ = unix.Write(s.evfd, one[:])
	}
	s.mu.RUnlock()
}

// Writes counts the eventfd writes made by Wake (tests: wakes coalesce).
func (s *Set) Writes() uint64 { return s.writes.Load() }

// Fd is the epoll set's own descriptor (tests: telling it from the
// runtime's).
func (s *Set) Fd() int { return s.epfd }

// Close releases the set; no Wait may be in progress. Later Adds fail,
// later wakes and Dels do nothing.
func (s *Set) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		unix.Close(s.evfd)
		unix.Close(s.epfd)
	}
	s.mu.Unlock()
}
