package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

var groupSerial atomic.Uint32

// mcastConfig is loopback multicast on groups and ports of this test's own.
func mcastConfig(t testing.TB) multicast.Config {
	t.Helper()
	c := multicast.DefaultConfig()
	serial := groupSerial.Add(1)
	base := rand.Uint32N(200) + 20
	c.StreamGroup = fmt.Sprintf("239.78.%d.%d:%d", base, 2*(serial%120)+1, freeUDPPort(t))
	c.CommandGroup = fmt.Sprintf("239.78.%d.%d:%d", base, 2*(serial%120)+2, freeUDPPort(t))
	return c
}

func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// delivered is one message a tail delivered.
type delivered struct {
	seq    uint64
	epoch  uint32
	acct   wire.Account
	cmdSeq uint64
	flags  uint8
}

// tail is a safe-mode, read-only receiver over multicast: what a node in
// safe mode would deliver.
type tail struct {
	mu     sync.Mutex
	msgs   []delivered
	maxCmd uint64 // highest cmdSeq of alice delivered
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func startTail(t *testing.T, mc multicast.Config) *tail {
	t.Helper()
	c, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	rc := receiver.DefaultConfig()
	rc.Session, rc.ReadOnly, rc.Rewind, rc.RewindFrom = standbytest.Session, true, true, 1
	rc.PendingRecords = 1 << 12
	r, err := receiver.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tl := &tail{cancel: cancel, done: make(chan struct{})}
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	handle := func() {
		rd := r.Ready()
		for _, f := range rd.Send {
			_ = c.Send(f.Bytes)
		}
		tl.mu.Lock()
		for _, m := range rd.Deliver {
			tl.msgs = append(tl.msgs, delivered{m.Seq, m.Epoch, m.Account, m.CmdSeq, m.Flags})
			if m.Account == standbytest.Alice && m.Flags&wire.FlagInternal == 0 {
				tl.maxCmd = max(tl.maxCmd, m.CmdSeq)
			}
		}
		if tl.err == nil {
			tl.err = r.Err()
		}
		tl.mu.Unlock()
		r.Advance()
	}
	onFrame := func(f []byte, _ transport.Peer) {
		_ = r.Step(now(), f, receiver.Sequencer)
		handle()
	}
	go func() {
		defer close(tl.done)
		defer c.Close()
		for ctx.Err() == nil {
			if _, err := c.Poll(onFrame, 5*time.Millisecond); err != nil {
				tl.mu.Lock()
				tl.err = err
				tl.mu.Unlock()
				return
			}
			r.Tick(now())
			handle()
			_ = c.Flush()
		}
	}()
	t.Cleanup(tl.stop)
	return tl
}

func (tl *tail) stop() {
	tl.cancel()
	<-tl.done
}

func (tl *tail) cmd() uint64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.maxCmd
}

// lastSeq is the seq of the last message the tail delivered.
func (tl *tail) lastSeq() uint64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.msgs) == 0 {
		return 0
	}
	return tl.msgs[len(tl.msgs)-1].seq
}

// sender sends alice's commands to the command group.
type sender struct {
	c transport.Client
}

func newSender(t *testing.T, mc multicast.Config) *sender {
	t.Helper()
	c, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &sender{c: c}
}

// send sends commands from..to of alice in one frame, again every 200ms,
// until done reports true (the sequencer drops the duplicates).
func (s *sender) send(t *testing.T, from, to uint64, what string, done func() bool) {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 1400), standbytest.Alice, 1, 0, standbytest.Session); err != nil {
		t.Fatal(err)
	}
	for q := from; q <= to; q++ {
		if err := w.Append(&wire.Command{CmdSeq: q, Payload: fmt.Appendf(nil, "c%d", q)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("commands %d..%d: %s did not happen within 30s", from, to, what)
		}
		_ = s.c.Send(w.Bytes())
		_ = s.c.Flush()
		for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end) && !done(); {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// member is a standby running on its own multicast client.
type standbyMember struct {
	id     uint64
	s      *standby.Agent
	fs     *PeerServer
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, mc multicast.Config, id uint64) *standbyMember {
	t.Helper()
	mc.FaultStream = id
	c, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := newStandby(t, standbyConfig(t, id), c)
	fs := fetchFrom(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	m := &standbyMember{id: id, s: s, fs: fs, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- s.Run(ctx) }()
	t.Cleanup(func() { m.kill(t) })
	return m
}

// kill stops the member's Run (as a crash would: it acks nothing more).
func (m *standbyMember) kill(t *testing.T) {
	m.cancel()
	if err := <-m.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("standby %d: Run: %v", m.id, err)
	}
	m.done <- nil // later kills return at once
}

// primary is a sequencer.Agent whose stable is a quorum's.
type primary struct {
	a      *sequencer.Agent
	srv    *multicast.Server
	q      *SharedQuorum
	cancel context.CancelFunc
	done   chan error
}

func startPrimary(t *testing.T, mc multicast.Config, epoch uint32, self uint64, cut uint64, tk *sequencer.Takeover) *primary {
	t.Helper()
	srv, err := multicast.NewServer(mc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := standbytest.SeqConfig(epoch, cut+1)
	var a *sequencer.Agent
	if tk != nil {
		a, err = sequencer.NewPrimaryAgent(cfg, srv, sequencer.SystemClock(), *tk)
	} else {
		a, err = sequencer.NewAgent(cfg, srv, sequencer.SystemClock())
	}
	if err != nil {
		t.Fatal(err)
	}
	q := NewSharedQuorum()
	if err := q.Reset(epoch, self, []uint64{1, 2, 3}, cut); err != nil {
		t.Fatal(err)
	}
	a.SetStableFunc(q.Update)
	ctx, cancel := context.WithCancel(context.Background())
	p := &primary{a: a, srv: srv, q: q, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- a.Run(ctx) }()
	t.Cleanup(p.stop)
	return p
}

func (p *primary) stop() {
	p.cancel()
	<-p.done
	p.done <- nil
	p.srv.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
	}
}

// TestCluster_StableNeedsAQuorumOverMulticast: a primary and two standbys
// over real UDP multicast on loopback. A safe-mode tail delivers only
// what a quorum acked: with both standbys, with one of them (2 of 3),
// and not past the last ack once both are gone, while the primary goes on
// sequencing.
func TestCluster_StableNeedsAQuorumOverMulticast(t *testing.T) {
	mc := mcastConfig(t)
	tl := startTail(t, mc)
	p := startPrimary(t, mc, 1, 1, 0, nil)
	b := startMember(t, mc, 2)
	c := startMember(t, mc, 3)
	snd := newSender(t, mc)

	snd.send(t, 1, 20, "delivery in safe mode with two standbys", func() bool { return tl.cmd() >= 20 })
	c.kill(t)
	snd.send(t, 21, 40, "delivery with one standby of two", func() bool { return tl.cmd() >= 40 })
	b.kill(t)
	snd.send(t, 41, 50, "sequencing with no standby", func() bool { return p.a.Stats().Commands >= 50 })
	// The primary sequenced 41..50 but no quorum holds them: nothing of
	// them may be delivered in safe mode. Give acks time to (wrongly)
	// arrive: the assertion can only miss a bug, never fail a good run.
	waitFor(t, "the primary's counters", func() bool { return p.a.LastSeq() >= 52 })
	time.Sleep(300 * time.Millisecond)
	if got := tl.cmd(); got != 40 {
		t.Fatalf("tail delivered up to command %d with no standby acking, want 40", got)
	}
	if st, last := p.q.Stable(), p.a.LastSeq(); st >= last {
		t.Fatalf("stable %d reached the last seq %d with no standby", st, last)
	}
	tl.mu.Lock()
	err := tl.err
	tl.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*standbyMember{b, c} {
		if st := m.s.Stats(); st.AcksSent == 0 || m.s.Err() != nil {
			t.Fatalf("standby: %+v, %v", st, m.s.Err())
		}
	}
}

// TestCluster_FailoverContinuesTheStream: the primary dies; the standby
// that lagged (it was down for a while) seals, catches up from the other
// over the fetch protocol, takes over and starts epoch 2 at cut+1. The
// surviving standby follows into epoch 2 and acks it; a resent command
// already in the stream is dropped, new ones are sequenced once; a safe
// tail sees one gap-free stream with every command once.
func TestCluster_FailoverContinuesTheStream(t *testing.T) {
	mc := mcastConfig(t)
	tl := startTail(t, mc)
	p := startPrimary(t, mc, 1, 1, 0, nil)
	a := startMember(t, mc, 2)
	b := startMember(t, mc, 3)
	snd := newSender(t, mc)

	snd.send(t, 1, 20, "delivery with two standbys", func() bool { return tl.cmd() >= 20 })
	b.kill(t) // b lags from here
	snd.send(t, 21, 40, "delivery with one standby", func() bool { return tl.cmd() >= 40 })
	p.stop()
	last := p.a.Core().Published()
	waitFor(t, "standby a holds the whole epoch", func() bool { return a.s.Contiguous() == last })
	seq, snap := a.s.Snapshot()
	if seq != last || !bytes.Equal(snap, p.a.Core().State().Snapshot()) {
		t.Fatalf("standby a's State at %d differs from the primary's at %d", seq, last)
	}

	// The epoch change, as the Raft leader (member 3, b) runs it.
	ca, err := a.s.Seal(1)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.s.Seal(1)
	if err != nil {
		t.Fatal(err)
	}
	cut := max(ca, cb)
	if cut != last || cb >= cut {
		t.Fatalf("seal: a %d, b %d, last published %d: want a at the end and b behind", ca, cb, last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.s.CatchUp(ctx, cut, []string{a.fs.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	tk, err := b.s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tk.State.Snapshot(), snap) {
		t.Fatal("the new primary's State differs from the old primary's at the cut")
	}
	p2 := startPrimary(t, mc, 2, 3, cut, &tk)

	// 31..40 were sequenced in epoch 1: resent, they are dropped.
	snd.send(t, 31, 50, "delivery in epoch 2", func() bool { return tl.cmd() >= 50 })
	waitFor(t, "standby a follows epoch 2", func() bool { return a.s.Contiguous() >= p2.a.LastSeq() && p2.a.LastSeq() > cut })
	if st := p2.a.Stats(); st.Commands != 10 || st.Duplicates < 10 {
		t.Fatalf("new primary: %d commands sequenced, %d duplicates; want 10 and at least 10", st.Commands, st.Duplicates)
	}
	if err := a.s.Err(); err != nil {
		t.Fatal(err)
	}
	if st := a.s.Stats(); st.Acked <= cut {
		t.Fatalf("standby a acked up to %d, nothing of epoch 2 (cut %d)", st.Acked, cut)
	}

	tl.stop()
	if tl.err != nil {
		t.Fatal(tl.err)
	}
	seen := map[uint64]int{}
	for i, m := range tl.msgs {
		if m.seq != tl.msgs[0].seq+uint64(i) {
			t.Fatalf("tail: message %d has seq %d after %d", i, m.seq, tl.msgs[i-1].seq)
		}
		if want := uint32(1 + btoi(m.seq > cut)); m.epoch != want {
			t.Fatalf("tail: seq %d in epoch %d, want %d (cut %d)", m.seq, m.epoch, want, cut)
		}
		if m.acct == standbytest.Alice && m.flags&wire.FlagInternal == 0 {
			seen[m.cmdSeq]++
		}
	}
	for q := uint64(1); q <= 50; q++ {
		if seen[q] != 1 && tl.msgs[0].seq == 1 {
			t.Fatalf("command %d delivered %d times", q, seen[q])
		}
	}
	t.Logf("cut %d, epoch 2 up to %d; tail delivered %d..%d", cut, p2.a.LastSeq(), tl.msgs[0].seq, tl.msgs[len(tl.msgs)-1].seq)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCluster_StandbysUnderLoss: standbys whose sockets lose, duplicate
// and reorder datagrams (seeded) still hold the primary's stream and
// State exactly (repairs by NAK, packets ahead of a gap stashed and
// appended in order), and stable keeps advancing.
func TestCluster_StandbysUnderLoss(t *testing.T) {
	mc := mcastConfig(t)
	tl := startTail(t, mc)
	p := startPrimary(t, mc, 1, 1, 0, nil)
	lossy := mc
	lossy.Faults.Loss, lossy.Faults.Dup, lossy.Faults.Reorder, lossy.Faults.Seed = 0.05, 0.02, 0.05, 7
	a := startMember(t, lossy, 2)
	b := startMember(t, lossy, 3)
	snd := newSender(t, mc)
	const n = 300
	for q := uint64(1); q <= n; q++ {
		snd.send(t, q, q, "safe delivery with lossy standbys", func() bool { return tl.cmd() >= q })
	}
	// The tail delivered on a quorum's acks (the primary's and one
	// standby's): the other standby may still be repairing what it lost,
	// from the primary only. Stop the primary once both hold all it
	// published (LastSeq, as of its last snapshot, is past what the tail
	// delivered: it is current).
	waitFor(t, "both standbys hold what the primary published", func() bool {
		end := p.a.LastSeq()
		return end >= tl.lastSeq() && a.s.Contiguous() >= end && b.s.Contiguous() >= end
	})
	p.stop()
	last := p.a.Core().Published()
	want := p.a.Core().State().Snapshot()
	for _, m := range []*standbyMember{a, b} {
		waitFor(t, fmt.Sprintf("standby %d holds the stream", m.id), func() bool { return m.s.Contiguous() == last })
		m.kill(t)
		seq, snap := m.s.Snapshot()
		if seq != last || !bytes.Equal(snap, want) {
			t.Fatalf("standby %d: State at %d differs from the primary's at %d", m.id, seq, last)
		}
		st := m.s.Stats()
		t.Logf("standby %d: %+v", m.id, st)
	}
	if a.s.Stats().Stashed+b.s.Stats().Stashed == 0 {
		t.Error("no packet waited in a stash: the faults did not reach the standbys")
	}
}
