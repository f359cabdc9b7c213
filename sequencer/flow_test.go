package sequencer

import (
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func statusFrame(t testing.TB, acct wire.Account, flags uint16, contiguous uint64) []byte {
	t.Helper()
	b, err := wire.AppendStatus(make([]byte, wire.StatusBytes), &wire.Status{
		Session: testSession, Epoch: 1, Flags: flags, Instance: 1, Account: acct, Incarnation: 1,
		Contiguous: contiguous, Delivered: contiguous,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flowConfig() Config {
	cfg := testConfig()
	cfg.MaxPacketBytes = 1472
	cfg.RingBytes = 32 * 1472
	return cfg
}

// flowFeed sends one 200-byte command of account a per frame and flushes
// it into a packet of its own.
type flowFeed struct {
	c   SinkShell
	now int64
	seq uint64
}

func (f *flowFeed) send(t testing.TB) {
	t.Helper()
	f.now += int64(time.Microsecond)
	if err := f.c.Step(at(f.now), frame(t, acctA, 1, 0, cmd(f.seq+1, strings.Repeat("a", 200))), 1); err != nil {
		t.Fatal(err)
	}
	f.c.Flush(at(f.now))
	if f.c.Stats().FlowPaused == 0 {
		f.seq++
	}
}

// sendB puts one command of account B (instance 1) into the stream: B is
// then a sender, whose reports may hold the stream back.
func (f *flowFeed) sendB(t testing.TB) {
	t.Helper()
	f.now += int64(time.Microsecond)
	if err := f.c.Step(at(f.now), frame(t, acctB, 1, 0, cmd(1, "b")), 2); err != nil {
		t.Fatal(err)
	}
	f.c.Flush(at(f.now))
}

func (f *flowFeed) status(t testing.TB, acct wire.Account, flags uint16, contiguous uint64, from transport.Peer) {
	t.Helper()
	if err := f.c.Step(at(f.now), statusFrame(t, acct, flags, contiguous), from); err != nil {
		t.Fatal(err)
	}
}

// TestCore_FlowControlHoldsTheStreamForASlowSender: a sending node that
// reports it holds only seq 2 keeps the stream from running a flow window
// ahead of it, so its next seq never leaves the ring; once it catches up
// the stream goes on. Without flow control the ring evicts what it needs
// and it dies with ErrUnrecoverable (the 1400-byte bench of issue 6).
func TestCore_FlowControlHoldsTheStreamForASlowSender(t *testing.T) {
	c, _ := newCore(t, flowConfig())
	f := &flowFeed{c: c}
	f.send(t)  // seqs 1..3: session start, epoch start, the first command
	f.sendB(t) // seq 4: B is a sender
	f.status(t, acctB, 0, 2, 2)
	for i := 0; i < 400 && c.Stats().FlowPaused == 0; i++ {
		f.send(t)
	}
	if c.Stats().FlowPaused == 0 {
		t.Fatalf("400 commands past a receiver at seq 2 never paused the stream; stats %+v", c.Stats())
	}
	tail := c.Published()
	for i := 0; i < 200; i++ {
		f.send(t)
	}
	if c.Published() != tail {
		t.Fatalf("paused stream went on from %d to %d", tail, c.Published())
	}
	if _, ok := c.ring.posOf(3); !ok {
		t.Fatal("seq 3, which the slow receiver lacks, left the ring while the stream was paused")
	}
	lags := c.Receivers(nil)
	if len(lags) != 1 || lags[0].Account != acctB || lags[0].Contiguous != 2 || lags[0].Lag != tail-2 {
		t.Fatalf("Receivers = %+v, want B at 2 lagging %d", lags, tail-2)
	}
	// The slow receiver catches up: commands are taken again.
	f.status(t, acctB, 0, tail, 2)
	paused := c.Stats().FlowPaused
	f.send(t)
	if c.Stats().FlowPaused != paused || c.Published() != tail+1 {
		t.Fatalf("after the receiver caught up: paused %d -> %d, published %d, want %d",
			paused, c.Stats().FlowPaused, c.Published(), tail+1)
	}
}

// TestCore_FlowControlIgnoresReadOnlyReceivers: a tail never slows the
// stream; it is let fall off the ring (and will get Gone).
func TestCore_FlowControlIgnoresReadOnlyReceivers(t *testing.T) {
	c, _ := newCore(t, flowConfig())
	f := &flowFeed{c: c}
	f.send(t)
	f.status(t, 0, wire.StatusReadOnly, 2, 9)
	for i := 0; i < 400; i++ {
		f.send(t)
	}
	if st := c.Stats(); st.FlowPaused != 0 {
		t.Fatalf("a read-only receiver paused the stream: %+v", st)
	}
	if _, ok := c.ring.posOf(3); ok {
		t.Fatal("400 packets of 200 bytes did not wrap a 46 KiB ring: the test proves nothing")
	}
	if lags := c.Receivers(nil); len(lags) != 1 || !lags[0].ReadOnly {
		t.Fatalf("Receivers = %+v, want one read-only", lags)
	}
}

// TestCore_FlowControlForgetsSilentReceivers: a receiver that stops
// reporting (dead, cut off) holds the stream back for FlowReceiverTimeout
// at most.
func TestCore_FlowControlForgetsSilentReceivers(t *testing.T) {
	cfg := flowConfig()
	cfg.FlowReceiverTimeout = 100 * time.Millisecond
	c, _ := newCore(t, cfg)
	f := &flowFeed{c: c}
	f.send(t)  // seqs 1..3: session start, epoch start, the first command
	f.sendB(t) // seq 4: B is a sender
	f.status(t, acctB, 0, 2, 2)
	for i := 0; i < 400 && c.Stats().FlowPaused == 0; i++ {
		f.send(t)
	}
	if c.Stats().FlowPaused == 0 {
		t.Fatal("never paused")
	}
	tail := c.Published()
	for step := 0; step < 20; step++ {
		f.now += int64(10 * time.Millisecond)
		c.Tick(at(f.now))
	}
	f.send(t)
	f.c.Flush(at(f.now))
	if c.Published() <= tail {
		t.Fatalf("stream still paused 200ms after the receiver's last report (timeout 100ms); stats %+v", c.Stats())
	}
}

// TestCore_FlowControlOff: FlowWindowPercent 0 never pauses.
func TestCore_FlowControlOff(t *testing.T) {
	cfg := flowConfig()
	cfg.FlowWindowPercent = 0
	c, _ := newCore(t, cfg)
	f := &flowFeed{c: c}
	f.send(t) // seqs 1..3: session start, epoch start, the first command
	f.status(t, acctB, 0, 2, 2)
	for i := 0; i < 400; i++ {
		f.send(t)
	}
	if st := c.Stats(); st.FlowPaused != 0 {
		t.Fatalf("paused with flow control off: %+v", st)
	}
}

// TestCore_ReceiverTableBounded: reports from ever new receivers (tails
// come and go) never grow the table past MaxReceivers; the least recently
// heard is forgotten and the newest are tracked.
func TestCore_ReceiverTableBounded(t *testing.T) {
	cfg := flowConfig()
	cfg.MaxReceivers = 8
	c, _ := newCore(t, cfg)
	f := &flowFeed{c: c}
	f.send(t)
	for i := 0; i < 10000; i++ {
		f.now += int64(time.Microsecond)
		if err := c.Step(at(f.now), statusFrame(t, 0, wire.StatusReadOnly, 1), transport.Peer(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	lags := c.Receivers(nil)
	if len(lags) != 8 {
		t.Fatalf("%d receivers tracked, want 8", len(lags))
	}
	for _, l := range lags {
		if l.SilentNs > int64(8*time.Microsecond) {
			t.Fatalf("an old receiver is still tracked: %+v", l)
		}
	}
}

// TestCore_StatusBeyondTailIgnored: a report of a seq never published
// (another epoch's primary, a forgery) does not move anything.
func TestCore_StatusBeyondTailIgnored(t *testing.T) {
	c, _ := newCore(t, flowConfig())
	f := &flowFeed{c: c}
	f.send(t)
	f.status(t, acctB, 0, 1000, 2)
	if st := c.Stats(); st.StatusBeyondTail != 1 || st.Statuses != 0 || len(c.Receivers(nil)) != 0 {
		t.Fatalf("stats %+v receivers %+v", st, c.Receivers(nil))
	}
}

func TestCore_StatusAllocatesNothing(t *testing.T) {
	c, _ := newCore(t, flowConfig())
	f := &flowFeed{c: c}
	f.send(t)
	st := statusFrame(t, acctB, 0, 1)
	if a := testing.AllocsPerRun(1000, func() {
		if err := c.Step(at(f.now), st, 2); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("status: %v allocs, want 0", a)
	}
}

// TestCore_FlowControlFollowsTheQuorumNotTheSlowestStandby: of two
// standbys, one stays alive but never acks past seq 2 (a failing disk
// under durable); the other keeps up. Stable needs only a majority
// (the primary and the healthy standby), and so does flow control: the
// stream runs well past 2 + the flow window. The slow standby's lag shows
// in Receivers. When the quorum itself lags (both standbys slow) the
// stream pauses, as for a slow sender.
func TestCore_FlowControlFollowsTheQuorumNotTheSlowestStandby(t *testing.T) {
	cfg := flowConfig()
	cfg.Standalone = false
	c, _ := newCore(t, cfg)
	f := &flowFeed{c: c}
	ack := func(member, contiguous uint64, from transport.Peer) {
		t.Helper()
		if err := c.Step(at(f.now), standbyAck(t, member, 1, contiguous), from); err != nil {
			t.Fatal(err)
		}
	}
	f.send(t) // seqs 1..3: session start, epoch start, the first command
	window := uint64(cfg.RingBytes) * uint64(cfg.FlowWindowPercent) / 100 / 200
	for i := 0; i < 400; i++ {
		f.send(t)
		ack(2, 2, 2)
		ack(3, c.Published(), 3)
		// The shell's quorum of {1, 2, 3}: the second highest position.
		c.SetStable(c.Published())
		c.TakeStandbyAcks(nil)
	}
	if st := c.Stats(); st.FlowPaused != 0 || c.Published() < 2+4*window {
		t.Fatalf("a slow standby throttled the stream: published %d (window about %d seqs), stats %+v",
			c.Published(), window, st)
	}
	var slow *ReceiverLag
	lags := c.Receivers(nil)
	for i := range lags {
		if lags[i].Standby && lags[i].Member == 2 {
			slow = &lags[i]
		}
	}
	if slow == nil || slow.Contiguous != 2 || slow.Lag != c.Published()-2 {
		t.Fatalf("Receivers = %+v, want standby 2 at 2 lagging %d", lags, c.Published()-2)
	}

	// Now the healthy standby stops at the tail too: stable stays, and
	// the stream stops a flow window ahead of it.
	held := c.Published()
	for i := 0; i < 400 && c.Stats().FlowPaused == 0; i++ {
		f.send(t)
		ack(2, 2, 2)
		ack(3, held, 3)
		c.SetStable(held)
	}
	if c.Stats().FlowPaused == 0 {
		t.Fatalf("400 commands past a quorum at %d never paused the stream; stats %+v", held, c.Stats())
	}
	if _, ok := c.ring.posOf(held + 1); !ok {
		t.Fatalf("seq %d, which the quorum lacks, left the ring", held+1)
	}
	// The quorum catches up: commands are taken again.
	tail := c.Published()
	ack(3, tail, 3)
	c.SetStable(tail)
	paused := c.Stats().FlowPaused
	f.send(t)
	if c.Stats().FlowPaused != paused || c.Published() != tail+1 {
		t.Fatalf("after the quorum caught up: paused %d -> %d, published %d, want %d",
			paused, c.Stats().FlowPaused, c.Published(), tail+1)
	}
}
