package bridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/tcp"
)

// dense reports whether s saw every data seq 1..high, and high.
func (s *siteFrames) dense() (bool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := uint64(1); q <= s.high; q++ {
		if !s.seqs[q] {
			return false, s.high
		}
	}
	return true, s.high
}

// TestLink_StandbyEndsTakeOver: a warm standby at each end of a link.
// The standby sending end follows A's stream into its store but does not
// listen; the standby receiving end merges and persists but publishes
// nothing on its site. The active sending end stops and the standby is
// activated: B's stream goes on with no gap. The active receiving end
// stops and its standby is activated: it answers its site's NAKs from
// its store (kept current while standby) and publishes all that A
// publishes after.
func TestLink_StandbyEndsTakeOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seqAddr := tcpSequencer(t, ctx, 87)
	siteA := watchSite(t, ctx, tcpClient(t, seqAddr))
	tcp1, tcp2 := freeAddr(t), freeAddr(t)

	ctx1, stop1 := context.WithCancel(ctx)
	s1 := startSend(t, ctx1, seqAddr, func(c *Config) { c.TCP = []string{tcp1} })
	s2 := startSend(t, ctx, seqAddr, func(c *Config) { c.TCP = []string{tcp2}; c.Standby = true })

	// Two receiving ends of site B, each on a site server of its own,
	// each following both sending ends; the second a standby.
	startRecv := func(c context.Context, standby bool) (*ReceiveEnd, *siteFrames) {
		rc := receiveConfig(t, "B")
		rc.TCP, rc.UDP, rc.Standby = []string{tcp1, tcp2}, nil, standby
		site := tcpSite(t)
		// The site's watcher connects before the end runs: one that
		// came later missed the first packets republished (seqs 1-2
		// are in the stream already), is never repaired (it NAKs only
		// when told to) and the site looked holed (failed in CI).
		b := watchSite(t, ctx, tcpClient(t, site.(*tcp.Server).Addr().String()))
		r, err := NewReceiveEnd(rc, site)
		if err != nil {
			t.Fatal(err)
		}
		runEnd(t, c, r.Run)
		return r, b
	}
	rctx1, rstop1 := context.WithCancel(ctx)
	r1, b1 := startRecv(rctx1, false)
	r2, b2 := startRecv(ctx, true)

	caughtUp := func(what string, b *siteFrames) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, _, top := siteA.state()
			ok, high := b.dense()
			if top > 0 && ok && high >= top {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: site B holds up to %d (dense %v), site A published %d", what, high, ok, top)
			}
		}
	}
	sendNode(t, ctx, seqAddr, "ONE", 50)
	caughtUp("both ends active", b1)
	if c, err := net.DialTimeout("tcp", tcp2, time.Second); err == nil {
		c.Close()
		t.Fatal("the standby sending end listens on its TCP channel")
	}
	if s2.Active() || r2.Active() || !s1.Active() || !r1.Active() {
		t.Fatal("a standby is active, or an active end is not")
	}
	if _, _, high := b2.state(); high != 0 || r2.Stats().Published != 0 {
		t.Fatalf("the standby receiving end published (site saw up to %d)", high)
	}
	if st := s2.Service().Contiguous(); st == 0 {
		t.Fatal("the standby sending end's store follows nothing")
	}

	// The active sending end goes; the standby takes over.
	stop1()
	s2.Activate()
	sendNode(t, ctx, seqAddr, "TWO", 50)
	caughtUp("after the sending end's takeover", b1)

	// The active receiving end goes; the standby takes over: its site's
	// node NAKs what it missed and gets everything.
	rstop1()
	_, _, from := siteA.state()
	b2.naks.Store(87)
	r2.Activate()
	sendNode(t, ctx, seqAddr, "THREE", 50)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, has1, high := b2.state()
		_, _, top := siteA.state()
		if has1 && high >= top && b2.holdsRange(from+1, top) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the receiving end's takeover: its site has seq 1 (a NAK answered from its store) %v, up to %d of A's %d, dense from %d: %v",
				has1, high, top, from+1, b2.holdsRange(from+1, top))
		}
	}
	if r2.Stats().Published == 0 {
		t.Fatal("the activated receiving end published nothing")
	}
}

// holdsRange reports whether s saw every data seq from..to.
func (s *siteFrames) holdsRange(from, to uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := from; q <= to; q++ {
		if !s.seqs[q] {
			return false
		}
	}
	return true
}

// TestReceiveEnd_DeactivateStepsBack: of two active receiving ends of one
// pair (a false death made the standby take over while the active one
// lived), the one that steps back (Deactivate) stops republishing on its
// site but goes on persisting the stream, and Activate makes it publish
// again (what its site missed meanwhile its nodes NAK, as after a
// takeover: TestLink_StandbyEndsTakeOver).
func TestReceiveEnd_DeactivateStepsBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seqAddr := tcpSequencer(t, ctx, 88)
	siteA := watchSite(t, ctx, tcpClient(t, seqAddr))
	tcp1 := freeAddr(t)
	startSend(t, ctx, seqAddr, func(c *Config) { c.TCP = []string{tcp1} })
	startRecv := func() (*ReceiveEnd, *siteFrames) {
		rc := receiveConfig(t, "B")
		rc.TCP, rc.UDP = []string{tcp1}, nil
		site := tcpSite(t)
		b := watchSite(t, ctx, tcpClient(t, site.(*tcp.Server).Addr().String())) // before the end runs
		r, err := NewReceiveEnd(rc, site)
		if err != nil {
			t.Fatal(err)
		}
		runEnd(t, ctx, r.Run)
		return r, b
	}
	r1, b1 := startRecv()
	r2, b2 := startRecv()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s", what)
			}
		}
	}
	// Up to A's last seq, by the end's store and on its site (what a
	// site's watcher missed is not asked again here: no NAKs).
	caughtUp := func(r *ReceiveEnd, b *siteFrames) func() bool {
		return func() bool {
			_, _, top := siteA.state()
			_, _, high := b.state()
			return top > 0 && high >= top && r.Service().Contiguous() >= top
		}
	}
	sendNode(t, ctx, seqAddr, "ONE", 50)
	wait("both active ends republish", func() bool { return caughtUp(r1, b1)() && caughtUp(r2, b2)() })

	r2.Deactivate()
	if r2.Active() || !r1.Active() {
		t.Fatal("after Deactivate: the end is still active, or the other is not")
	}
	time.Sleep(50 * time.Millisecond) // what was in flight
	published := r2.Stats().Published
	_, _, before := b2.state()
	sendNode(t, ctx, seqAddr, "TWO", 50)
	wait("the active end republishes", caughtUp(r1, b1))
	_, _, top := siteA.state()
	wait("the standby persists", func() bool { return r2.Service().Contiguous() >= top })
	if got := r2.Stats().Published; got != published {
		t.Fatalf("the end that stepped back republished %d packets more", got-published)
	}
	if _, _, high := b2.state(); high != before {
		t.Fatalf("its site saw seqs up to %d after the step back, up to %d before", high, before)
	}

	r2.Activate()
	_, _, from := siteA.state()
	sendNode(t, ctx, seqAddr, "THREE", 50)
	wait("active again, it republishes what comes", func() bool {
		_, _, top := siteA.state()
		_, _, high := b2.state()
		return top > from && high >= top && b2.holdsRange(from+1, top)
	})
	if r2.Stats().Published == published {
		t.Fatal("the end made active again published nothing")
	}
}
