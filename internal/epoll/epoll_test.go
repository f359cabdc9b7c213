package epoll

import (
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair is a connected pair of stream sockets: a is added to sets, b
// writes to it.
func pair(t *testing.T) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	return fds[0], fds[1]
}

func newSet(t *testing.T, cfg Config) *Set {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func write(t *testing.T, fd int) {
	t.Helper()
	if _, err := unix.Write(fd, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// waitEvents waits (for ever, bounded by the test's timeout) until the
// set reports sockets or a wake, skipping interrupted waits.
func waitEvents(t *testing.T, s *Set) ([]unix.EpollEvent, bool) {
	t.Helper()
	for {
		events, woken, _, err := s.Wait(-1)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) > 0 || woken {
			return events, woken
		}
	}
}

// A readable socket is reported with the key it was added with, never
// with its descriptor, and only the last Wait's sockets are Reported.
func TestSet_ReportsKey(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	a1, b1 := pair(t)
	a2, _ := pair(t)
	if err := s.Add(a1, 7, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(a2, 8, 4); err != nil {
		t.Fatal(err)
	}
	write(t, b1)
	events, woken := waitEvents(t, s)
	if woken || len(events) != 1 {
		t.Fatalf("got %d events, woken %v; want the one socket", len(events), woken)
	}
	if lo, hi := Key(&events[0]); lo != 7 || hi != 3 {
		t.Fatalf("key (%d, %d), want (7, 3)", lo, hi)
	}
	if !s.Reported(7, 3) || s.Reported(8, 4) {
		t.Fatalf("Reported(7,3) %v, Reported(8,4) %v; want true, false", s.Reported(7, 3), s.Reported(8, 4))
	}
}

// Level-triggered, a socket left unread is reported again; edge-triggered
// it is reported once per arrival.
func TestSet_LevelAndEdge(t *testing.T) {
	for _, edge := range []bool{false, true} {
		s := newSet(t, Config{MaxEvents: 4, EdgeTriggered: edge})
		a, b := pair(t)
		if err := s.Add(a, 0, 1); err != nil {
			t.Fatal(err)
		}
		write(t, b)
		if events, _ := waitEvents(t, s); len(events) != 1 {
			t.Fatalf("edge %v: first wait got %d events, want 1", edge, len(events))
		}
		events, _, timedOut, err := s.Wait(0)
		if err != nil {
			t.Fatal(err)
		}
		if again := len(events) == 1; again == edge || timedOut != edge {
			t.Fatalf("edge %v: unread socket reported again %v (timed out %v)", edge, again, timedOut)
		}
	}
}

// With HangUp the peer's shutdown of its sending half is reported.
func TestSet_HangUp(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4, HangUp: true})
	a, b := pair(t)
	if err := s.Add(a, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Shutdown(b, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	events, _ := waitEvents(t, s)
	if len(events) != 1 || events[0].Events&unix.EPOLLRDHUP == 0 {
		t.Fatalf("events %+v, want the socket with EPOLLRDHUP", events)
	}
}

// A socket taken out is no longer reported; an empty wait times out.
func TestSet_DelAndTimeout(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	a, b := pair(t)
	if err := s.Add(a, 0, 1); err != nil {
		t.Fatal(err)
	}
	s.Del(a)
	write(t, b)
	// A wait interrupted by a signal is not timed out: wait again.
	for timedOut := false; !timedOut; {
		events, woken, to, err := s.Wait(time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 0 || woken || s.Reported(0, 1) {
			t.Fatalf("events %d woken %v after Del, want none", len(events), woken)
		}
		timedOut = to
	}
}

// Many wakes while nobody waits write the eventfd once and make one Wait
// return woken; the next does not.
func TestSet_WakesCoalesce(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				s.Wake()
			}
		})
	}
	wg.Wait()
	if w := s.Writes(); w != 1 {
		t.Fatalf("4000 wakes wrote the eventfd %d times, want 1", w)
	}
	if _, woken := waitEvents(t, s); !woken {
		t.Fatal("wait after wakes not woken")
	}
	_, woken, _, err := s.Wait(0)
	if err != nil || woken {
		t.Fatalf("second wait woken %v (err %v): the eventfd was not reset", woken, err)
	}
	// The next wake writes again.
	s.Wake()
	if _, woken := waitEvents(t, s); !woken || s.Writes() != 2 {
		t.Fatalf("woken %v, writes %d; want true, 2", woken, s.Writes())
	}
}

// A wake racing with a Wait about to block is never lost.
func TestSet_WakeNeverLost(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	for range 200 {
		done := make(chan bool, 1)
		go func() {
			_, woken := waitEvents(t, s)
			done <- woken
		}()
		s.Wake()
		if !<-done {
			t.Fatal("wait returned without the wake")
		}
	}
}

// ForceWake writes even while a wake is outstanding (Close must not wait
// on a write still on its way).
func TestSet_ForceWake(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	s.armed.Store(true) // a wake's write is on its way
	s.ForceWake()
	if _, woken := waitEvents(t, s); !woken {
		t.Fatal("ForceWake did not wake")
	}
}

// After Close, Add fails with ErrClosed and wakes and Dels do nothing
// (the descriptors' numbers may be another file's by then).
func TestSet_Closed(t *testing.T) {
	s, err := New(Config{MaxEvents: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pair(t)
	s.Close()
	s.Close()
	if err := s.Add(a, 0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
	s.Wake()
	s.ForceWake()
	s.Del(a)
}

func TestNew_MaxEvents(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New with MaxEvents 0 succeeded")
	}
}

// Wait, Wake and Reported allocate nothing: they run once per Poll.
func TestSet_AllocsPerRun(t *testing.T) {
	s := newSet(t, Config{MaxEvents: 4})
	a, b := pair(t)
	if err := s.Add(a, 0, 1); err != nil {
		t.Fatal(err)
	}
	write(t, b)
	allocs := testing.AllocsPerRun(100, func() {
		s.Wake()
		_, _, _, _ = s.Wait(0)
		_ = s.Reported(0, 1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Wake+Wait, want 0", allocs)
	}
}
