package cluster

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
)

// clockedServer is a stream server on a fake clock: each Poll that may
// block "sleeps" its whole wait (no frame ever comes) by moving the clock
// on, and counts itself. A Waker, like every real stream server.
type clockedServer struct {
	transport.Server
	mono   *int64
	blocks int
	waits  []time.Duration
}

func (s *clockedServer) Poll(h transport.Handler, d time.Duration) (int, error) {
	s.waits = append(s.waits, d)
	if d > 0 {
		s.blocks++
		*s.mono += int64(d)
	} else {
		*s.mono += 1000 // a non-blocking poll still takes a little
	}
	return 0, nil
}

func (s *clockedServer) Wake() {}

// fakeClockPrimaryShell is the shell of an epoch-1 primary of a
// three-member group (session 7, a 1 MiB ring) whose clock reads *mono,
// over wrap of a mem stream server; it returns the shell and its Core.
func fakeClockPrimaryShell(t *testing.T, mono *int64, wrap func(transport.Server) transport.Server) (*primaryShell, *sequencer.Core) {
	t.Helper()
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Standalone = 7, false
	cfg.RingBytes = 1 << 20
	srv := wrap(net.Server())
	core, err := sequencer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &Member{deps: Deps{Clock: func() sequencer.Time {
		return sequencer.Time{Mono: *mono, Wall: 1_700_000_000_000_000_000 + *mono}
	}}}
	acks := NewQuorumAcks(Epoch{Session: 7, Epoch: 1, FirstSeq: 1, Self: 1, Members: []fsm.Member{{ID: 1}, {ID: 2}, {ID: 3}}})
	return newPrimaryShell(n, core, srv, acks), core
}

// idlePrimaryShell is a primary's shell over a clockedServer, after its
// first turn (the epoch start).
func idlePrimaryShell(t *testing.T, wakeable bool) (*primaryShell, *clockedServer) {
	t.Helper()
	var mono int64 = 1_000_000_000
	var srv *clockedServer
	sh, core := fakeClockPrimaryShell(t, &mono, func(s transport.Server) transport.Server {
		srv = &clockedServer{Server: s, mono: &mono}
		return srv
	})
	sh.wakeable = wakeable
	core.Flush(sh.read())
	if _, err := sh.turn(); err != nil {
		t.Fatal(err)
	}
	return sh, srv
}

// TestPrimaryShell_IdleBlocksUntilNextHeartbeat: an idle primary whose
// stream server can be woken blocks in Poll until its next heartbeat
// (backing off to sequencer.max-heartbeat-interval, as a standalone
// sequencer does), not for a fixed millisecond: on the fake clock a
// simulated second of idle takes a few dozen Polls, not a thousand. An
// idle cluster member used 6-10% of a core polling every millisecond.
func TestPrimaryShell_IdleBlocksUntilNextHeartbeat(t *testing.T) {
	sh, srv := idlePrimaryShell(t, true)
	start := *srv.mono
	blocks0 := srv.blocks
	for *srv.mono-start < int64(time.Second) {
		if _, err := sh.turn(); err != nil {
			t.Fatal(err)
		}
	}
	blocks := srv.blocks - blocks0
	hbMax := sequencer.DefaultConfig().MaxHeartbeatInterval
	// Heartbeats at 10, 20, 40 ms, then every 50 ms: ~22 in a second.
	if limit := int(time.Second/hbMax) + 10; blocks > limit {
		t.Fatalf("an idle primary blocked in Poll %d times in a simulated second (limit %d): it polls on a short period (last waits %v)",
			blocks, limit, srv.waits[len(srv.waits)-5:])
	}
	if last := srv.waits[len(srv.waits)-1]; last != hbMax && last != 0 {
		t.Fatalf("idle waits end at %v, want the max heartbeat interval %v (or 0 at a heartbeat's turn)", last, hbMax)
	}
	if sh.polls == 0 || int(sh.polls) != srv.blocks {
		t.Fatalf("the shell counted %d blocking polls, the server saw %d", sh.polls, srv.blocks)
	}
}

// TestPrimaryShell_IdleWithoutWakerPollsEveryMillisecond: a stream
// server that cannot be woken keeps the short poll, so that a lost
// leadership still stops the primary within maxPrimaryWait.
func TestPrimaryShell_IdleWithoutWakerPollsEveryMillisecond(t *testing.T) {
	sh, srv := idlePrimaryShell(t, false)
	for range 50 {
		if _, err := sh.turn(); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range srv.waits[1:] {
		if w > maxPrimaryWait {
			t.Fatalf("poll %d waits %v with no way to wake it, want at most %v", i+1, w, maxPrimaryWait)
		}
	}
}

// TestPrimaryShell_CheckpointDueBoundsTheWait: a stable that moved and
// is not checkpointed yet is timed work: the idle wait ends when the
// next checkpoint is due.
func TestPrimaryShell_CheckpointDueBoundsTheWait(t *testing.T) {
	sh, srv := idlePrimaryShell(t, true)
	sh.due = *srv.mono + int64(3*time.Millisecond)
	if _, err := sh.turn(); err != nil {
		t.Fatal(err)
	}
	if w := srv.waits[len(srv.waits)-1]; w > 3*time.Millisecond {
		t.Fatalf("wait %v with a checkpoint due in 3ms", w)
	}
}

// wakeOnlyServer is a stream server whose Poll, when it may block and
// nothing is there, returns only when woken (Wake) or closed, whatever
// its wait: a primary on it ends, hands over or sees a membership change
// only if the Member wakes its loop. Polls that blocked are counted.
type wakeOnlyServer struct {
	transport.Server
	woken  chan struct{}
	done   chan struct{}
	closed atomic.Bool
	blocks atomic.Int64
	longer atomic.Int64 // blocking Polls asked to wait more than maxPrimaryWait
}

func newWakeOnlyServer() (transport.Server, error) {
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return nil, err
	}
	return &wakeOnlyServer{Server: net.Server(), woken: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

func (s *wakeOnlyServer) Poll(h transport.Handler, d time.Duration) (int, error) {
	n, err := s.Server.Poll(h, 0)
	if n > 0 || err != nil || d <= 0 {
		return n, err
	}
	s.blocks.Add(1)
	if d > maxPrimaryWait {
		s.longer.Add(1)
	}
	select {
	case <-s.woken:
		return s.Server.Poll(h, 0)
	case <-s.done:
		return 0, transport.ErrClosed
	}
}

func (s *wakeOnlyServer) Wake() {
	select {
	case s.woken <- struct{}{}:
	default:
	}
}

func (s *wakeOnlyServer) Close() error {
	if !s.closed.Swap(true) {
		close(s.done)
	}
	return s.Server.Close()
}

// TestMember_IdlePrimaryIsWokenToStop: the primary's loop blocks in Poll
// (a server that returns only when woken) and still hands over, sees a
// new voter, and stops when raft deposes it: each reaches it through a
// Wake, not a poll timer.
func TestMember_IdlePrimaryIsWokenToStop(t *testing.T) {
	c := &testCluster{t: t, timeouts: unitTimeouts(), stream: newWakeOnlyServer}
	ms := memberList(t, 3)
	for _, m := range ms {
		c.start(m, ms, false)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.stop()
		}
	})
	old := c.primary()
	// A handover ends the old primary's loop.
	var to *member
	for _, m := range c.members {
		m.fol.set(old.node.Status().Published)
		if m != old {
			to = m
		}
	}
	// Changed reports role changes (seqd sequencer --cluster prints them
	// from it instead of polling every millisecond).
	select {
	case <-old.node.Changed():
	default:
	}
	if _, err := old.node.TransferPrimary(context.Background(), to.cfg.ID); err != nil {
		t.Fatal(err)
	}
	p := c.primary()
	if p != to {
		t.Fatalf("primary %d after the handover, want %d", p.cfg.ID, to.cfg.ID)
	}
	select {
	case <-old.node.Changed():
	default:
		t.Fatal("the old primary's role changed with no token on Changed")
	}
	srv := waitStream(t, p)
	deadline := time.Now().Add(wait)
	for srv.longer.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle primary never blocked longer than %v (%d blocking polls)", maxPrimaryWait, srv.blocks.Load())
		}
		time.Sleep(time.Millisecond)
	}
	// A new voter reaches the blocked loop's quorum.
	four := memberList(t, 4)[3]
	m4 := c.start(four, append(p.node.State().Members(), four), true)
	if err := p.node.AddMember(four); err != nil {
		t.Fatal(err)
	}
	for !slices.Contains(p.acks.Load().voters(), four.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the blocked primary's quorum voters %v lack the new member", p.acks.Load().voters())
		}
		time.Sleep(time.Millisecond)
	}
	// Deposed (no quorum left), it stops.
	for _, m := range c.members {
		if m != p {
			m.stop()
		}
	}
	_ = m4
	for p.node.Role() == RolePrimary {
		if time.Now().After(deadline) {
			t.Fatal("a deposed primary blocked in Poll goes on sequencing")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStream returns the wakeOnlyServer of primary p's epoch.
func waitStream(t *testing.T, p *member) *wakeOnlyServer {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if r := p.node.primaryWake.Load(); r != nil {
			if s, ok := r.w.(*wakeOnlyServer); ok {
				return s
			}
			t.Fatal(errors.New("the primary's stream is not the test's server"))
		}
		if time.Now().After(deadline) {
			t.Fatal("the primary has no wakeable stream")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMember_RoleChangeSignalsChanged: every role change leaves a token on
// Changed, whatever the FSM does (seqd sequencer --cluster prints the
// role lines from it, with no 1 ms poll of Role).
func TestMember_RoleChangeSignalsChanged(t *testing.T) {
	n := &Member{changed: make(chan struct{}, 1)}
	for _, r := range []Role{RoleSealing, RolePrimary, RoleStandby, RoleStopped} {
		n.setRole(r)
		select {
		case <-n.Changed():
		default:
			t.Fatalf("no token on Changed after the role became %v", r)
		}
		if n.Role() != r {
			t.Fatalf("role %v, want %v", n.Role(), r)
		}
	}
}
