package standby

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func standbyConfig(t testing.TB, member uint64) Config {
	cfg := DefaultConfig()
	cfg.AckWritten = false // these tests were written against durable acks
	cfg.Member, cfg.Dir, cfg.MaxSenders, cfg.Session = member, t.TempDir(), 64, standbytest.Session
	cfg.Receiver.PendingRecords = 1 << 10
	cfg.Receiver.MaxReassemblyBytes = 1 << 20
	cfg.Receiver.MaxReceiveMessageBytes = 1 << 20
	cfg.Store.SegmentBytes = 64 << 20
	return cfg
}

func newStandby(t testing.TB, cfg Config, c transport.Client) *Agent {
	t.Helper()
	s, err := New(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeHolding is a config of member whose store holds pkts: a standby
// took them and closed, as a member restarted on its directory finds it.
func storeHolding(t testing.TB, member uint64, pkts [][]byte) Config {
	t.Helper()
	cfg := standbyConfig(t, member)
	// State snapshot files every few records: a reopen starts from one
	// (and must drop those a later cut makes stale).
	cfg.SnapshotEveryRecords = 4
	s, err := New(cfg, &standbytest.Client{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range pkts {
		s.frame(b, 0)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// syncAndAck makes the store durable and runs the standby's ack step, as
// a turn of Run does.
func syncAndAck(t testing.TB, s *Agent) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.core.store.Sync(); err != nil {
		t.Fatal(err)
	}
	s.ackLocked(s.clock())
}

// TestStandby_PersistsAppliesAndAcks: packets in any order (a gap filled
// late, a duplicate) reach the store in order; the State equals the
// primary's at the same position; the ack names the member, the epoch
// and the durable seq.
func TestStandby_PersistsAppliesAndAcks(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 30)
	fc := &standbytest.Client{Keep: true}
	s := newStandby(t, standbyConfig(t, 2), fc)
	for i := 0; i < len(pkts); i++ {
		switch i {
		case 5:
			continue // lost, repaired below
		case 20:
			s.frame(pkts[5], 0) // the repair
			s.frame(pkts[3], 0) // a duplicate
		}
		s.frame(pkts[i], 0)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	last := src.Core.Published()
	if got := s.Contiguous(); got != last {
		t.Fatalf("store holds up to %d, want %d", got, last)
	}
	if st := s.Stats(); st.Stashed == 0 || st.Appended != uint64(len(pkts)) {
		t.Fatalf("stats %+v: want stashed packets and %d appended", st, len(pkts))
	}
	seq, snap := s.Snapshot()
	if seq != last || !bytes.Equal(snap, src.Core.State().Snapshot()) {
		t.Fatalf("standby state at %d differs from the primary's at %d", seq, last)
	}
	syncAndAck(t, s)
	acks := fc.Acks(t)
	if len(acks) != 1 {
		t.Fatalf("%d acks, want 1", len(acks))
	}
	if a := acks[0]; a.Member != 2 || a.Epoch != 1 || a.Contiguous != last || a.Session != standbytest.Session {
		t.Fatalf("ack %+v, want member 2 epoch 1 contiguous %d", a, last)
	}
	syncAndAck(t, s)
	if n := len(fc.Acks(t)); n != 1 {
		t.Fatalf("an unchanged ack was sent again before the keepalive (%d acks)", n)
	}
}

// TestStandby_AcksOnlyDurable: an ack never runs ahead of the fsync unless
// AckWritten says so.
func TestStandby_AcksOnlyDurable(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 5)
	for _, written := range []bool{false, true} {
		fc := &standbytest.Client{Keep: true}
		cfg := standbyConfig(t, 2)
		cfg.AckWritten = written
		s := newStandby(t, cfg, fc)
		for _, p := range pkts {
			s.frame(p, 0)
		}
		s.mu.Lock()
		s.ackLocked(s.clock())
		s.mu.Unlock()
		acks := fc.Acks(t)
		want := uint64(0)
		if written {
			want = src.Core.Published()
		}
		if len(acks) != 1 || acks[0].Contiguous != want {
			t.Fatalf("AckWritten=%v: acks %+v, want one of %d", written, acks, want)
		}
	}
}

// TestStandby_SealFreezesUntilTheNextEpoch: after Seal(1) the standby
// takes nothing more of epoch 1 (the old primary goes on) and acks
// nothing of it; the next epoch's packets are stored and acked with epoch
// 2; a seal of an older epoch is refused.
func TestStandby_SealFreezesUntilTheNextEpoch(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 10)
	fc := &standbytest.Client{Keep: true}
	s := newStandby(t, standbyConfig(t, 2), fc)
	for _, p := range pkts {
		s.frame(p, 0)
	}
	cut, err := s.Seal(1)
	if err != nil || cut != src.Core.Published() {
		t.Fatalf("Seal(1) = %d, %v; want %d", cut, err, src.Core.Published())
	}
	seq, snap := s.Snapshot()
	for _, p := range src.Commands(t, 5) { // the deposed primary goes on
		s.frame(p, 0)
	}
	if s.Contiguous() != cut || s.Stats().SealedDrops != 5 {
		t.Fatalf("after the seal: holds %d (want %d), sealed drops %d (want 5)", s.Contiguous(), cut, s.Stats().SealedDrops)
	}
	syncAndAck(t, s)
	if acks := fc.Acks(t); len(acks) != 0 {
		t.Fatalf("acks of a sealed epoch: %+v", acks)
	}
	if _, err := s.Seal(0); !errors.Is(err, ErrSealed) {
		t.Fatalf("Seal(0) after Seal(1): %v, want ErrSealed", err)
	}

	// Epoch 2 from the cut, by a primary that took over a state at the cut.
	st := sequencer.NewState(64, 1)
	if err := st.Restore(snap); err != nil || st.LastSeq() != seq {
		t.Fatal(err)
	}
	next := src.NextEpoch(t, standbytest.SeqConfig(2, cut+1), st, 10)
	c2 := next.Core
	for _, p := range next.Commands(t, 5) {
		s.frame(p, 0)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Contiguous() != c2.Published() {
		t.Fatalf("holds %d, want %d", s.Contiguous(), c2.Published())
	}
	syncAndAck(t, s)
	acks := fc.Acks(t)
	if len(acks) != 1 || acks[0].Epoch != 2 || acks[0].Contiguous != c2.Published() {
		t.Fatalf("acks %+v, want one of epoch 2 at %d", acks, c2.Published())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("standby state differs from the new primary's")
	}
}

// TestStandby_TakeoverAtACutBelowTheState: a standby that applied beyond
// the cut rebuilds the State at exactly the cut (from a snapshot and the
// store); a cut it does not hold is refused; after a Takeover, Run stops
// and a second Takeover is refused.
func TestStandby_TakeoverAtACutBelowTheState(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 30)
	cfg := standbyConfig(t, 2)
	cfg.SnapshotEveryRecords = 7
	s := newStandby(t, cfg, &standbytest.Client{})
	for _, p := range pkts {
		s.frame(p, 0)
	}
	if _, err := s.Takeover(src.Core.Published() + 1); !errors.Is(err, ErrBehindCut) {
		t.Fatalf("Takeover beyond the store: %v, want ErrBehindCut", err)
	}
	const cut = 20
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State.LastSeq() != cut || !bytes.Equal(tk.State.Snapshot(), standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatalf("takeover state at %d differs from the stream's at %d", tk.State.LastSeq(), cut)
	}
	if _, err := sequencer.NewPrimarySinkShell(standbytest.SeqConfig(2, cut+1), &standbytest.Stream{}, tk); err != nil {
		t.Fatalf("NewPrimary: %v", err)
	}
	if _, err := s.Takeover(cut); !errors.Is(err, ErrTakenOver) {
		t.Fatalf("second Takeover: %v, want ErrTakenOver", err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrTakenOver) {
		t.Fatalf("Run after Takeover: %v, want ErrTakenOver", err)
	}
	// The history answers at or below the cut only.
	var got uint64
	tk.History.Range(1, cut, func(_ []byte, info sequencer.PacketInfo) bool { got = info.LastSeq(); return true })
	if got < cut {
		t.Fatalf("history served up to %d, want %d", got, cut)
	}
}

// TestStandby_RestartRebuildsFromTheStore: a standby reopened on its
// directory holds the same State as before and repairs from the store's
// end.
func TestStandby_RestartRebuildsFromTheStore(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 12)
	cfg := standbyConfig(t, 2)
	s, err := New(cfg, &standbytest.Client{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		s.frame(p, 0)
	}
	_, want := s.Snapshot()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newStandby(t, cfg, &standbytest.Client{})
	if seq, snap := s2.Snapshot(); seq != src.Core.Published() || !bytes.Equal(snap, want) {
		t.Fatalf("reopened state at %d differs", seq)
	}
	for _, p := range src.Commands(t, 3) {
		s2.frame(p, 0)
	}
	if s2.Contiguous() != src.Core.Published() || s2.Err() != nil {
		t.Fatalf("after restart holds %d, want %d (%v)", s2.Contiguous(), src.Core.Published(), s2.Err())
	}
}

// TestStandby_StashBounded: packets ahead of a gap beyond MaxStashBytes
// stop the standby with ErrStashFull instead of being lost.
func TestStandby_StashBounded(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 2000)
	cfg := standbyConfig(t, 2)
	cfg.MaxStashBytes = 1 << 16
	cfg.Receiver.PendingRecords = 1 << 12
	s := newStandby(t, cfg, &standbytest.Client{})
	for _, p := range pkts[3:] {
		s.frame(p, 0)
	}
	if err := s.Err(); !errors.Is(err, ErrStashFull) {
		t.Fatalf("Err = %v, want ErrStashFull", err)
	}
}

// TestStandby_FramePathAllocatesNothing: an in-order packet (receive,
// append, apply) and an ack allocate nothing.
func TestStandby_FramePathAllocatesNothing(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 1600)
	fc := &standbytest.Client{}
	s := newStandby(t, standbyConfig(t, 2), fc)
	for _, p := range pkts[:500] {
		s.frame(p, 0)
	}
	i := 500
	if n := testing.AllocsPerRun(1000, func() {
		s.frame(pkts[i], 0)
		i++
		s.mu.Lock()
		s.core.ackAny = false // force an ack
		s.ackLocked(s.clock())
		s.mu.Unlock()
	}); n != 0 {
		t.Fatalf("%v allocations per packet and ack, want 0", n)
	}
	if err := s.Err(); err != nil || s.Contiguous() < 1500 {
		t.Fatalf("holds %d, %v", s.Contiguous(), err)
	}
}

// BenchmarkStandby_Frame is the standby's in-order path per packet of one
// small command: receive, append to the store (no fsync), apply, ack.
func BenchmarkStandby_Frame(b *testing.B) {
	src := standbytest.NewStream(b)
	pkts := src.Commands(b, 200000)
	cfg := standbyConfig(b, 2)
	cfg.Store.SegmentBytes = 1 << 30
	s := newStandby(b, cfg, &standbytest.Client{})
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i == len(pkts) {
			b.StopTimer()
			s.Close()
			s = newStandby(b, standbyConfig(b, 2), &standbytest.Client{})
			i = 0
			b.StartTimer()
		}
		s.frame(pkts[i], 0)
		i++
		s.mu.Lock()
		s.ackLocked(s.clock())
		s.mu.Unlock()
	}
}

// wakeClient blocks in Poll until woken, like a socket with no traffic.
type wakeClient struct {
	standbytest.Client
	wake  chan struct{}
	woken atomic.Bool // a Poll returned because of Wake
}

func (c *wakeClient) Poll(_ transport.Handler, wait time.Duration) (int, error) {
	select {
	case <-c.wake:
		c.woken.Store(true)
	case <-time.After(wait):
	}
	return 0, nil
}

func (c *wakeClient) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// TestStandby_RunStopsAtOnceWhenCancelled: cancelling Run wakes its Poll
// (a Waker client), so the Node's stop before a Takeover does not wait
// for the poll timeout (up to 100 ms).
func TestStandby_RunStopsAtOnceWhenCancelled(t *testing.T) {
	c := &wakeClient{wake: make(chan struct{}, 1)}
	s := newStandby(t, standbyConfig(t, 2), c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(20 * time.Millisecond) // let Run block in Poll
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
	if !c.woken.Load() {
		t.Fatal("Run returned after its Poll timed out: cancelling did not wake it")
	}
}

// TestStandby_RepairStraddlingTheCutIsTrimmed: a repair of the old epoch
// whose packet runs past the new epoch's start is stored without the cut
// records, and the new epoch's packets follow it in the store.
func TestStandby_RepairStraddlingTheCutIsTrimmed(t *testing.T) {
	src := standbytest.NewStream(t)
	src.Commands(t, 4)
	straddling := src.Batch(t, 4) // seqs last-3..last
	var p wire.Packet
	if err := wire.DecodePacket(straddling, &p); err != nil {
		t.Fatal(err)
	}
	cut := p.FirstSeq + 1 // two of its records survive the failover
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, b := range src.Pkts[:len(src.Pkts)-1] {
		s.frame(b, 0)
	}
	next := src.NextEpoch(t, standbytest.SeqConfig(2, cut+1), standbytest.ReferenceState(t, src.Pkts, cut), 100)
	c2 := next.Core
	next.Commands(t, 3)
	for _, b := range next.Pkts {
		s.frame(b, 0) // ahead of the gap: stashed
	}
	rep := bytes.Clone(straddling)
	wire.SetPacketFlags(rep, wire.PacketRetransmit)
	wire.SetStable(rep, cut)
	s.frame(rep, 0)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Contiguous() != c2.Published() || s.Stats().Truncated != 1 {
		t.Fatalf("holds %d (want %d), truncated %d (want 1)", s.Contiguous(), c2.Published(), s.Stats().Truncated)
	}
	s.mu.Lock()
	e1, _ := s.core.store.EpochOf(cut)
	e2, _ := s.core.store.EpochOf(cut + 1)
	s.mu.Unlock()
	if e1 != 1 || e2 != 2 {
		t.Fatalf("store epochs: seq %d in %d, seq %d in %d", cut, e1, cut+1, e2)
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("standby state differs from the new primary's")
	}
}

// TestStandby_BeyondTheCutHeals: a standby that held records of the old
// epoch above the cut (it was not in the sealing quorum) drops them when
// the new epoch begins: its State is rebuilt at the cut, its store
// restarts at the epoch start, and it follows and acks the new epoch
// with the new primary's State. The same holds after a restart on that
// store.
func TestStandby_BeyondTheCutHeals(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 10)
	fc := &standbytest.Client{Keep: true}
	cfg := standbyConfig(t, 2)
	cfg.SnapshotEveryRecords = 4
	s, err := New(cfg, fc)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range pkts {
		s.frame(b, 0)
	}
	cut := src.Core.Published() - 3
	next := src.NextEpoch(t, standbytest.SeqConfig(2, cut+1), standbytest.ReferenceState(t, pkts, cut), 100)
	c2 := next.Core
	for _, b := range next.Commands(t, 4) {
		s.frame(b, 0)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err = %v, want the divergence healed", err)
	}
	if st := s.Stats(); st.Healed != 1 || s.Contiguous() != c2.Published() {
		t.Fatalf("healed %d (want 1), holds %d (want %d)", st.Healed, s.Contiguous(), c2.Published())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("healed standby's State differs from the new primary's")
	}
	syncAndAck(t, s)
	acks := fc.Acks(t)
	if a := acks[len(acks)-1]; a.Epoch != 2 || a.Contiguous != c2.Published() {
		t.Fatalf("last ack %+v, want epoch 2 at %d", a, c2.Published())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A standby reopened on a store that holds the deposed primary's
	// records past the cut (the restart came before the new epoch).
	stale := storeHolding(t, 3, pkts)
	s3 := newStandby(t, stale, &standbytest.Client{})
	for _, b := range next.Pkts {
		s3.frame(b, 0)
	}
	if err := s3.Err(); err != nil || s3.Contiguous() != c2.Published() {
		t.Fatalf("reopened standby: %v, holds %d (want %d)", err, s3.Contiguous(), c2.Published())
	}
	if _, snap := s3.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("reopened standby's State differs from the new primary's")
	}
	// Reopened once more, on the healed store (cut frames, then the new
	// epoch): the State is rebuilt through the new epoch.
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	s3 = newStandby(t, stale, &standbytest.Client{})
	if seq, snap := s3.Snapshot(); seq != c2.Published() || !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatalf("standby reopened on a healed store: State at %d, want the new primary's at %d", seq, c2.Published())
	}

	// The same when the first frame it sees is a later packet of the new
	// epoch (the epoch's start record comes only as a repair): it stayed
	// on its stale tail, appending the new epoch after it (found by the
	// simulator's cluster scenario).
	late := storeHolding(t, 4, pkts)
	s4 := newStandby(t, late, &standbytest.Client{})
	// More of the new epoch, numbered on from alice's last command
	// before the cut; the standby sees them before the epoch's first
	// packet (a repair, last).
	next.CmdSeq = standbytest.LastCmdOf(t, pkts, standbytest.Alice, cut)
	later := next.Commands(t, 6)
	if len(later) == 0 || c2.Published() < cut+6 {
		t.Fatalf("the new epoch published up to %d, want commands past %d", c2.Published(), cut+1)
	}
	for _, b := range later {
		s4.frame(b, 0)
	}
	// Healing, before the epoch's first packet: the stale tail past the
	// cut is not held (not acked, not reported to a seal).
	if got := s4.Contiguous(); got > cut {
		t.Fatalf("while healing, Contiguous = %d, above the cut %d (the tail past it is cut records)", got, cut)
	}
	if got, err := s4.Seal(1); err != nil || got > cut {
		t.Fatalf("while healing, Seal(1) = %d, %v: want at most the cut %d", got, err, cut)
	}
	rep := bytes.Clone(next.Pkts[0])
	wire.SetPacketFlags(rep, wire.PacketRetransmit)
	s4.frame(rep, 0)
	if err := s4.Err(); err != nil || s4.Contiguous() != c2.Published() || s4.Stats().Healed != 1 {
		t.Fatalf("reopened standby, new epoch seen late: %v, holds %d (want %d, cut %d), %+v", err, s4.Contiguous(), c2.Published(), cut, s4.Stats())
	}
	if _, snap := s4.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("reopened standby's State differs from the new primary's (new epoch seen late)")
	}
	s4.mu.Lock()
	e, _ := s4.core.store.EpochOf(cut + 1)
	s4.mu.Unlock()
	if e != 2 {
		t.Fatalf("seq %d is of epoch %d in the store, want 2", cut+1, e)
	}
	if err := s4.Close(); err != nil {
		t.Fatal(err)
	}
	s4 = newStandby(t, late, &standbytest.Client{})
	if seq, snap := s4.Snapshot(); seq != c2.Published() || !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatalf("reopened on the store healed late: State at %d, want the new primary's at %d", seq, c2.Published())
	}
}

// TestStandby_NewEpochPacketWinsInTheStash: when the deposed primary's
// packet above the cut waits in the stash and the new primary's packet
// at the same seq arrives, the new one is kept: the store follows the new
// epoch once the gap below is repaired.
func TestStandby_NewEpochPacketWinsInTheStash(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 20)
	first := func(b []byte) uint64 {
		var p wire.Packet
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		return p.FirstSeq
	}
	cut := src.Core.Published() - 5
	const gap = 8
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	var lost []byte
	for _, b := range pkts {
		switch q := first(b); {
		case q == gap:
			lost = b
		case q <= cut+1:
			s.frame(b, 0) // cut+1 is the deposed primary's: stashed behind the gap
		}
	}
	next := src.NextEpoch(t, standbytest.SeqConfig(2, cut+1), standbytest.ReferenceState(t, pkts, cut), 100)
	c2 := next.Core
	for _, b := range next.Commands(t, 3) {
		s.frame(b, 0)
	}
	rep := bytes.Clone(lost)
	wire.SetPacketFlags(rep, wire.PacketRetransmit)
	s.frame(rep, 0)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Contiguous() != c2.Published() {
		t.Fatalf("holds %d, want the new epoch's %d", s.Contiguous(), c2.Published())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("standby state differs from the new primary's")
	}
}

// TestStandby_FragmentedMessagesStored: messages in fragments, in order
// or not, reach the store whole and the State equals the primary's.
func TestStandby_FragmentedMessagesStored(t *testing.T) {
	src := &standbytest.Stream{}
	c, err := sequencer.NewSinkShell(standbytest.SmallPackets(1, 1), src)
	if err != nil {
		t.Fatal(err)
	}
	src.Core = c
	var pkts [][]byte
	for range 10 {
		pkts = append(pkts, src.Mixed(t)...)
	}
	if len(pkts) < 30 {
		t.Fatalf("%d packets: the commands were not fragmented", len(pkts))
	}
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	pkts[7], pkts[8] = pkts[8], pkts[7] // a fragment ahead of its predecessor
	for _, p := range pkts {
		s.frame(p, 0)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Contiguous() != c.Published() {
		t.Fatalf("holds %d, want %d", s.Contiguous(), c.Published())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c.State().Snapshot()) {
		t.Fatal("standby state differs from the primary's")
	}
}

// TestStandby_CutInsideAFragmentedMessage: the primary dies while a
// message in fragments is half published; the cut is the seq before it
// and the new epoch starts at its seq. The standby stored nothing of the
// cut message (it keeps the fragments back until the message is whole),
// so the new epoch's packets follow in the store.
func TestStandby_CutInsideAFragmentedMessage(t *testing.T) {
	src := &standbytest.Stream{}
	c, err := sequencer.NewSinkShell(standbytest.SmallPackets(1, 1), src)
	if err != nil {
		t.Fatal(err)
	}
	src.Core = c
	pkts := append(src.Commands(t, 3), src.Mixed(t)...)
	pkts = pkts[:len(pkts)-1] // the last fragment never left the old primary
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range pkts {
		s.frame(p, 0)
	}
	cut, err := s.Seal(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Published() - 1; cut != want {
		t.Fatalf("sealed at %d, want %d (the seq before the message in fragments)", cut, want)
	}
	next := src.NextEpoch(t, standbytest.SmallPackets(2, cut+1), standbytest.ReferenceState(t, src.Pkts, cut), 100)
	c2 := next.Core
	for _, p := range next.Commands(t, 3) {
		s.frame(p, 0)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Contiguous() != c2.Published() {
		t.Fatalf("holds %d, want the new epoch's %d", s.Contiguous(), c2.Published())
	}
	s.mu.Lock()
	e, _ := s.core.store.EpochOf(cut + 1)
	s.mu.Unlock()
	if e != 2 {
		t.Fatalf("seq %d stored in epoch %d, want 2", cut+1, e)
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c2.State().Snapshot()) {
		t.Fatal("standby state differs from the new primary's")
	}
}

// TestStandby_MissedTwoEpochsHealsWithKnowEpoch: a standby reopened on a
// store whose tail lies past epoch 1's cut, after epochs 2 and 3 began,
// sees epoch 3 first: from the stream alone its tail looks whole (epoch
// 3 starts above it). Told where epoch 2 began (KnowEpoch, from the
// failover state), it does not count the tail, heals, and follows both
// epochs to the new primary's State (found by the simulator, seed 56).
func TestStandby_MissedTwoEpochsHealsWithKnowEpoch(t *testing.T) {
	src, e2, e3, pkts, cut := standbytest.LaterEpochs(t, 2, 5)
	c2, c3 := e2.Core, e3.Core
	cut2 := c2.Published()
	if cut2+1 <= src.Core.Published() {
		t.Fatalf("epoch 3 starts at %d, within the stale tail (to %d): the test needs it above", cut2+1, src.Core.Published())
	}

	held := storeHolding(t, 2, pkts)
	if seqs := diskSnapSeqs(t, held); len(seqs) == 0 || slices.Max(seqs) <= cut {
		t.Fatalf("snapshot files at %v: the test needs one above the cut %d", seqs, cut)
	}
	s := newStandby(t, held, &standbytest.Client{})
	s.KnowEpoch(2, cut+1)
	// The State went back to the cut: no snapshot file may describe the
	// cut records at the next open.
	if seqs := diskSnapSeqs(t, held); len(seqs) > 0 && slices.Max(seqs) > cut {
		t.Fatalf("after the State went back to the cut %d, snapshot files at %v remain", cut, seqs)
	}
	if got := s.Contiguous(); got != cut {
		t.Fatalf("told epoch 2 began at %d, Contiguous = %d, want %d", cut+1, got, cut)
	}
	if seq, snap := s.Snapshot(); seq != cut || !bytes.Equal(snap, standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatalf("told epoch 2 began at %d, the State is at %d: want the stream's at %d (a Takeover at the cut took the cut records)", cut+1, seq, cut)
	}
	for _, b := range e3.Pkts {
		s.frame(b, 0)
	}
	for _, b := range e2.Pkts {
		rep := bytes.Clone(b)
		wire.SetPacketFlags(rep, wire.PacketRetransmit)
		s.frame(rep, 0)
	}
	if err := s.Err(); err != nil || s.Contiguous() != c3.Published() {
		t.Fatalf("after two missed epochs: %v, holds %d (want %d), %+v", err, s.Contiguous(), c3.Published(), s.Stats())
	}
	if _, snap := s.Snapshot(); !bytes.Equal(snap, c3.State().Snapshot()) {
		t.Fatal("State differs from the epoch 3 primary's")
	}
	// Reopened on the healed store (from a snapshot file, if one is
	// left): the same State.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := newStandby(t, held, &standbytest.Client{})
	if _, snap := r.Snapshot(); !bytes.Equal(snap, c3.State().Snapshot()) || len(r.Opened().Rejected) != 0 {
		t.Fatalf("reopened on the healed store: %+v, State differs from the epoch 3 primary's: %v", r.Opened(), !bytes.Equal(snap, c3.State().Snapshot()))
	}
}

// diskSnapSeqs are the seqs of the State snapshot files in cfg's directory.
func diskSnapSeqs(t *testing.T, cfg Config) []uint64 {
	t.Helper()
	var out []uint64
	for _, n := range snapFileNames {
		if d, err := readSnapFile(snapFSOf(cfg), filepath.Join(cfg.Dir, n)); err == nil {
			out = append(out, d.seq)
		}
	}
	return out
}

// TestStandby_HealedLateRecordsTheEpochStart: a standby reopened on a
// store that holds epoch 1 past its cut heals on a later packet of epoch
// 2 (the epoch's first packet lost), and epoch 3 begins right after that
// stale tail before epoch 2's first packet comes as a repair. The store
// must record where epoch 2 began when it heals (replayer.BeginEpoch):
// otherwise epoch 3's first packet follows the cut records, the store's
// epoch table skips epoch 2, and as a primary's history it serves the cut
// records of epoch 1 as epoch 1's (sim seed 1457). Told the epoch start
// on open (KnowEpoch), the store records it at once.
func TestStandby_HealedLateRecordsTheEpochStart(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 10)
	tail := src.Core.Published()
	cut := tail - 3
	e2 := src.NextEpoch(t, standbytest.SeqConfig(2, cut+1), standbytest.ReferenceState(t, pkts, cut), standbytest.LastCmdOf(t, pkts, standbytest.Alice, cut))
	c2 := e2.Core
	for c2.Published() < tail {
		e2.Commands(t, 1)
	}
	if c2.Published() != tail || len(e2.Pkts) < 2 {
		t.Fatalf("epoch 2 published up to %d in %d packets, want exactly to the stale tail %d", c2.Published(), len(e2.Pkts), tail)
	}
	e3 := e2.NextEpoch(t, standbytest.SeqConfig(3, tail+1), c2.State(), e2.CmdSeq)
	c3 := e3.Core
	e3.Commands(t, 4)

	follow := func(t *testing.T, s *Agent) {
		t.Helper()
		for _, b := range e2.Pkts[1:] {
			s.frame(b, 0)
		}
		for _, b := range e3.Pkts {
			s.frame(b, 0)
		}
		rep := bytes.Clone(e2.Pkts[0])
		wire.SetPacketFlags(rep, wire.PacketRetransmit)
		s.frame(rep, 0)
		if err := s.Err(); err != nil || s.Contiguous() != c3.Published() {
			t.Fatalf("%v, holds %d (want %d), %+v", err, s.Contiguous(), c3.Published(), s.Stats())
		}
		if _, snap := s.Snapshot(); !bytes.Equal(snap, c3.State().Snapshot()) {
			t.Fatal("State differs from the epoch 3 primary's")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		checkStoreEpochs(t, s, cut, tail)
	}
	t.Run("heal", func(t *testing.T) {
		s := newStandby(t, storeHolding(t, 2, pkts), &standbytest.Client{})
		follow(t, s)
		if s.Stats().Healed != 1 {
			t.Fatalf("healed %d times, want 1", s.Stats().Healed)
		}
	})
	t.Run("know", func(t *testing.T) {
		s := newStandby(t, storeHolding(t, 2, pkts), &standbytest.Client{})
		s.KnowEpoch(2, cut+1)
		s.mu.Lock()
		c := s.core.store.Contiguous()
		e := s.core.store.Epochs()
		s.mu.Unlock()
		if c != cut || len(e) != 2 || e[1].Epoch != 2 || e[1].Start != cut+1 {
			t.Fatalf("told epoch 2 began at %d: the store holds up to %d with epochs %+v, want %d and epoch 2's start", cut+1, c, e, cut)
		}
		follow(t, s)
	})
}

// checkStoreEpochs: the standby's store has epochs 2 (from cut+1) and 3
// (from start3), and serves no packet of epoch 1 above the cut.
func checkStoreEpochs(t *testing.T, s *Agent, cut, start3 uint64) {
	t.Helper()
	e := s.core.store.Epochs()
	if len(e) != 3 || e[1].Epoch != 2 || e[1].Start != cut+1 || e[2].Epoch != 3 || e[2].Start != start3+1 {
		t.Fatalf("store epochs %+v: want epoch 2 from %d and epoch 3 from %d", e, cut+1, start3+1)
	}
	var p wire.Packet
	s.core.store.Range(1, start3, func(pkt []byte, _ sequencer.PacketInfo) bool {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch == 1 && p.LastSeq() > cut {
			t.Fatalf("the store serves epoch 1's packet %d..%d, past its cut %d", p.FirstSeq, p.LastSeq(), cut)
		}
		return true
	})
}
