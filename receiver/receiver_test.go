package receiver

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

const ms = int64(time.Millisecond)

// TestReceiver_ReadyCarriesPersistSendDeliver: Step and Tick call nothing;
// everything to do comes out in Ready, and Advance empties it.
func TestReceiver_ReadyCarriesPersistSendDeliver(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Persist = true
	r := newTest(t, cfg)
	if err := r.Step(0, s.msgs(1, 2), Sequencer); err != nil {
		t.Fatal(err)
	}
	if err := r.Step(0, s.msgs(5, 1), Sequencer); err != nil {
		t.Fatal(err)
	}
	r.Tick(time.Second.Nanoseconds())
	rd := r.Ready()
	if len(rd.Persist) != 2 || len(rd.Deliver) != 2 || len(rd.Send) != 1 || rd.Send[0].To != Sequencer {
		t.Fatalf("Ready: %d persist, %d send, %d deliver", len(rd.Persist), len(rd.Send), len(rd.Deliver))
	}
	if rd.Deliver[0].Seq != 1 || string(rd.Deliver[1].Payload) != "m2" {
		t.Fatalf("deliver %+v", rd.Deliver)
	}
	r.Advance()
	if !r.Ready().Empty() {
		t.Fatal("Ready not empty after Advance")
	}
}

// TestReceiver_GoneMovesToTheNextSourceThenStops: NAKs go to the preferred
// source; each Gone from the source asked moves them to the next one at
// once; a Gone from the last untried source is fatal and names the whole
// missing range.
func TestReceiver_GoneMovesToTheNextSourceThenStops(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.RepairSources = 2
	cfg.PreferredSource = 1
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(1, 2), s.msgs(10, 1))
	d.tick(10 * ms)
	naks := d.naks()
	if len(naks) != 1 || naks[0].to != 1 || naks[0].nak.FromSeq != 3 || naks[0].nak.ToSeq != 9 {
		t.Fatalf("NAKs %+v, want 3..9 to source 1", naks)
	}
	// A Gone from a source not asked is ignored.
	d.step(11*ms, Sequencer, s.gone(3, 9, 10))
	if d.r.Err() != nil || d.r.Stats().GoneIgnored != 1 {
		t.Fatalf("Gone from source 0 while asking 1: err %v, stats %+v", d.r.Err(), d.r.Stats())
	}
	d.step(12*ms, 1, s.gone(3, 9, 6)) // source 1 holds 6.. only
	d.tick(12 * ms)
	naks = d.naks()
	if len(naks) != 2 || naks[1].to != 2 || naks[1].nak.FromSeq != 3 {
		t.Fatalf("after Gone from 1: NAKs %+v, want one to source 2 at once", naks)
	}
	d.step(13*ms, 2, s.gone(3, 9, 8))
	d.tick(13 * ms)
	naks = d.naks()
	if len(naks) != 3 || naks[2].to != Sequencer {
		t.Fatalf("after Gone from 2: NAKs %+v, want one to the sequencer", naks)
	}
	err := d.step(14*ms, Sequencer, s.gone(3, 9, 7))
	want := "receiver: unrecoverable gap: seqs 3..6 no longer retained by sequencer (oldest 7)"
	if !errors.Is(err, ErrUnrecoverable) || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
	if st := d.r.Stats(); st.SourceSwitches != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestReceiver_GoneHonouredOnlyForTheEpochAndRangeAsked: a Gone of another
// epoch (a deposed primary) or for a range this receiver did not ask is
// ignored; before, any Gone with an older oldest stopped the receiver.
func TestReceiver_GoneHonouredOnlyForTheEpochAndRangeAsked(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, testConfig())}
	d.step(0, Sequencer, s.msgs(1, 2), s.msgs(10, 1))
	d.step(0, Sequencer, s.gone(3, 9, 10)) // nothing asked yet
	d.tick(time.Second.Nanoseconds())      // asks 3..9
	old := newStream(t)
	old.epoch = 0
	d.step(0, Sequencer, old.gone(3, 9, 10))
	d.step(0, Sequencer, s.gone(2, 9, 10))  // wider than asked
	d.step(0, Sequencer, s.gone(3, 12, 13)) // wider than asked
	if d.r.Err() != nil || d.r.Stats().GoneIgnored != 4 {
		t.Fatalf("err %v, stats %+v", d.r.Err(), d.r.Stats())
	}
	if err := d.step(0, Sequencer, s.gone(3, 9, 10)); !errors.Is(err, ErrUnrecoverable) {
		t.Fatalf("Gone for the range asked: %v", err)
	}
}

// TestReceiver_GapErrorNamesTheWholeRange: the range is not capped at the
// receive window (it was: "seqs 1..65536 no longer retained (oldest
// 69553)" for a rewind from 1 against a ring holding 69553..).
func TestReceiver_GapErrorNamesTheWholeRange(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, testConfig())} // 1024-record window
	d.step(0, Sequencer, s.msgs(69553, 1))
	d.tick(time.Second.Nanoseconds())
	n := d.naks()
	if len(n) != 1 {
		t.Fatalf("NAKs %+v", n)
	}
	err := d.step(0, Sequencer, s.gone(n[0].nak.FromSeq, n[0].nak.ToSeq, 69553))
	want := "receiver: unrecoverable gap: seqs 1..69552 no longer retained by sequencer (oldest 69553)"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
}

// TestReceiver_RepairBelowTheCutAcceptedAfterTheNewEpoch: seqs below a cut
// are accepted from a repair carried by their own epoch's header (a ring
// or a replayer) after the next epoch began, and every message's epoch
// follows from its position, whatever header carried it.
func TestReceiver_RepairBelowTheCutAcceptedAfterTheNewEpoch(t *testing.T) {
	one := newStream(t)
	two := newStream(t)
	two.epoch, two.epochStart = 2, 4
	d := &drive{t: t, r: newTest(t, testConfig())}
	d.step(0, Sequencer, one.packet(1, 1, 0, rec{payload: []byte("1")}))
	// 2 and 3 of epoch 1 are lost; epoch 2 starts at 4.
	d.step(0, Sequencer, two.packet(4, 5, 0, rec{payload: []byte("4")}, rec{payload: []byte("5")}))
	// Repairs: 2 in its original epoch-1 packet (from a ring), 3 in a
	// packet of epoch 2 (re-sent by the new primary).
	one.flags = wire.PacketRetransmit
	d.step(0, Sequencer, one.packet(2, 3, 0, rec{payload: []byte("2")}))
	two.flags = wire.PacketRetransmit
	d.step(0, Sequencer, two.packet(3, 5, 0, rec{payload: []byte("3")}))
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("delivered %v", got)
	}
	for _, m := range d.delivered {
		want := uint32(1)
		if m.Seq >= 4 {
			want = 2
		}
		if m.Epoch != want {
			t.Fatalf("seq %d in epoch %d, want %d", m.Seq, m.Epoch, want)
		}
	}
	// A deposed primary's packet above its cut is fenced.
	one.flags = 0
	d.step(0, Sequencer, one.packet(6, 6, 0, rec{payload: []byte("stale")}))
	if len(d.delivered) != 5 || d.r.Stats().Fenced != 1 {
		t.Fatalf("delivered %v, stats %+v", d.seqs(), d.r.Stats())
	}
}

// TestReceiver_EpochChangesOnlyWithAValidStart: a newer epoch whose start
// is below the current epoch's start, or at or below a stable seq (which
// every failover keeps), is counted and dropped.
func TestReceiver_EpochChangesOnlyWithAValidStart(t *testing.T) {
	s := newStream(t)
	s.epoch, s.epochStart = 2, 10
	d := &drive{t: t, r: newTest(t, testConfig())}
	cfg := testConfig()
	cfg.Rewind = false
	d.r = newTest(t, cfg)
	d.step(0, Sequencer, s.msgs(10, 3)) // stable 12
	for _, start := range []uint64{5, 12} {
		bad := newStream(t)
		bad.epoch, bad.epochStart = 3, start
		d.step(0, Sequencer, bad.packet(13, 13, 0, rec{payload: []byte("forged")}))
	}
	if st := d.r.Stats(); st.BadEpoch != 2 || d.r.Epoch() != 2 || len(d.delivered) != 3 {
		t.Fatalf("epoch %d, delivered %v, stats %+v", d.r.Epoch(), d.seqs(), st)
	}
	good := newStream(t)
	good.epoch, good.epochStart = 3, 13
	d.step(0, Sequencer, good.msgs(13, 1))
	if d.r.Epoch() != 3 || len(d.delivered) != 4 {
		t.Fatalf("valid epoch 3: epoch %d, delivered %v", d.r.Epoch(), d.seqs())
	}
}

// TestReceiver_WildStableIgnored: a stable far beyond anything published
// is not believed (a safe receiver would deliver what is not stable, and
// NAK up to it).
func TestReceiver_WildStableIgnored(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.StableLeadSeqs = 100
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.packet(1, 1<<40, 0, rec{payload: []byte("a")}, rec{payload: []byte("b")}))
	d.tick(time.Second.Nanoseconds())
	if len(d.delivered) != 0 || len(d.naks()) != 0 || d.r.Stats().WildStable != 1 {
		t.Fatalf("delivered %v, naks %+v, stats %+v", d.seqs(), d.naks(), d.r.Stats())
	}
	d.step(0, Sequencer, s.heartbeat(3, 2, 0))
	if !slices.Equal(d.seqs(), []uint64{1, 2}) {
		t.Fatalf("delivered %v after a sane stable", d.seqs())
	}
}

// TestReceiver_ForgedFragmentReservesNoMemory: memory grows with bytes that
// arrived, not with the total a packet declares (one 308-byte forged
// packet reserved 128 MiB).
func TestReceiver_ForgedFragmentReservesNoMemory(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.MaxReceiveMessageBytes = 128 << 20
	cfg.MaxReassemblyBytes = 256 << 20
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(1, 1))
	frag := s.packet(2, 1, 0, rec{payload: make([]byte, 200), flags: wire.FlagFragment, total: 128 << 20, offset: 1 << 20})
	head := s.packet(3, 1, 0, rec{payload: make([]byte, 200), flags: wire.FlagFragment, total: 128 << 20})
	t.Logf("forged packets: %d bytes", len(frag))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d.step(0, Sequencer, frag, head)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("two forged fragments allocated %d bytes", got)
	}
	if d.r.used > 64<<10 {
		t.Fatalf("budget charged %d bytes", d.r.used)
	}
}

// TestReceiver_BudgetFullStillCompletesTheNextMessage: partial messages of
// vanished senders above the next seq cannot pin the budget: the next
// message evicts them (they are asked for again later).
func TestReceiver_BudgetFullStillCompletesTheNextMessage(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.MaxReceiveMessageBytes = 1 << 20
	cfg.MaxReassemblyBytes = 1 << 20
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(1, 1))
	chunk := bytes.Repeat([]byte("z"), 60000)
	// Seqs 3..6: 4 x 240 kB held of 1 MiB messages that never complete.
	for q := uint64(3); q <= 6; q++ {
		for off := 0; off < 240000; off += len(chunk) {
			d.step(0, Sequencer, s.packet(q, 1, 0, rec{payload: chunk, flags: wire.FlagFragment, total: 1 << 20, offset: uint32(off)}))
		}
	}
	// Seq 2, a whole 1 MiB message, arrives.
	msg := bytes.Repeat([]byte("y"), 1<<20)
	for off := 0; off < len(msg); off += len(chunk) {
		end := min(off+len(chunk), len(msg))
		d.step(0, Sequencer, s.packet(2, 2, 0, rec{payload: msg[off:end], flags: wire.FlagFragment, total: 1 << 20, offset: uint32(off)}))
	}
	if !slices.Equal(d.seqs(), []uint64{1, 2}) || !bytes.Equal(d.delivered[1].Payload, msg) {
		t.Fatalf("delivered %v", d.seqs())
	}
	if d.r.used > cfg.MaxReassemblyBytes || d.r.Stats().BudgetDrops == 0 {
		t.Fatalf("used %d, stats %+v", d.r.used, d.r.Stats())
	}
}

// TestReceiver_StatusReportsPosition: a Status goes to the sequencer every
// StatusInterval while the position moves, then as a keepalive.
func TestReceiver_StatusReportsPosition(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.StatusInterval = 10 * time.Millisecond
	cfg.ReadOnly = true
	cfg.Account = wire.MustAccount("tail")
	d := &drive{t: t, r: newTest(t, cfg)}
	d.tick(0)
	if len(d.sent) != 0 {
		t.Fatal("status before the stream started")
	}
	d.step(0, Sequencer, s.msgs(1, 3), s.packet(5, 3, 0, rec{payload: []byte("5")}))
	for now := int64(0); now <= time.Second.Nanoseconds(); now += ms {
		d.tick(now)
		if now == 15*ms {
			d.step(now, Sequencer, s.msgs(4, 2))
		}
	}
	var st []wire.Status
	for _, x := range d.sent {
		if x.kind == wire.KindStatus {
			if x.to != Sequencer {
				t.Fatalf("status to %d", x.to)
			}
			st = append(st, x.status)
		}
	}
	// 0ms: 3 delivered; 20ms: 5; then a keepalive 500ms later (520ms).
	if len(st) != 3 {
		t.Fatalf("%d status frames: %+v", len(st), st)
	}
	want := wire.Status{Session: 77, Epoch: 1, Flags: wire.StatusReadOnly, Account: cfg.Account, Contiguous: 3, Delivered: 3}
	if st[0] != want {
		t.Fatalf("first status %+v\nwant %+v", st[0], want)
	}
	if st[1].Delivered != 5 || st[1].Contiguous != 5 {
		t.Fatalf("second status %+v", st[1])
	}
}

// TestReceiver_NoRewindByDefault: a receiver starts at the live tail
// unless Rewind is set.
func TestReceiver_NoRewindByDefault(t *testing.T) {
	if DefaultConfig().Rewind {
		t.Fatal("Rewind on by default")
	}
	s := newStream(t)
	cfg := DefaultConfig()
	cfg.StatusInterval = 0
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(10, 2))
	d.tick(time.Second.Nanoseconds())
	if !slices.Equal(d.seqs(), []uint64{10, 11}) || len(d.sent) != 0 {
		t.Fatalf("delivered %v, sent %+v", d.seqs(), d.sent)
	}
	cfg.Rewind, cfg.RewindFrom = true, 5
	d = &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, s.msgs(10, 2))
	d.tick(time.Second.Nanoseconds())
	if n := d.naks(); len(n) != 1 || n[0].nak.FromSeq != 5 || n[0].nak.ToSeq != 9 {
		t.Fatalf("rewind from 5: NAKs %+v", n)
	}
}

func TestCutTable(t *testing.T) {
	var c cutTable
	for _, x := range []cut{{1, 1}, {3, 100}, {2, 50}} {
		if !c.add(x.epoch, x.start) {
			t.Fatalf("add %+v refused", x)
		}
	}
	for _, bad := range []cut{{2, 51}, {4, 99}, {0, 2}} {
		if c.add(bad.epoch, bad.start) {
			t.Fatalf("add %+v accepted", bad)
		}
	}
	for q, want := range map[uint64]uint32{1: 1, 49: 1, 50: 2, 99: 2, 100: 3, 1 << 40: 3} {
		if e, ok := c.epochOf(q); !ok || e != want {
			t.Fatalf("epochOf(%d) = %d %v, want %d", q, e, ok, want)
		}
	}
	var gap cutTable
	gap.add(1, 1)
	gap.add(3, 100)
	if _, ok := gap.epochOf(60); ok {
		t.Fatal("epochOf with epoch 2 unknown: want unknown")
	}
}

// TestReceiver_DrainStoppingAtAGapKeepsThePosition: held records delivered
// up to a missing one leave the receiver's position right after them, so
// the NAK asks for the missing seq (it once asked for delivered seqs
// again, forever: the simulator's seed 99 hung).
func TestReceiver_DrainStoppingAtAGapKeepsThePosition(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, testConfig())}
	// 2, 3 and 5 held, not stable; then 1 comes with stable 5: 1 is
	// delivered from the packet, 2 and 3 from the ring, 4 is missing.
	d.step(0, Sequencer, s.packet(2, 0, 0, rec{payload: []byte("2")}, rec{payload: []byte("3")}))
	d.step(0, Sequencer, s.packet(5, 0, 0, rec{payload: []byte("5")}))
	d.step(0, Sequencer, s.packet(1, 5, 0, rec{payload: []byte("1")}))
	d.tick(time.Second.Nanoseconds())
	if got := d.seqs(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("delivered %v", got)
	}
	if n := d.naks(); len(n) != 1 || n[0].nak.FromSeq != 4 || n[0].nak.ToSeq != 4 {
		t.Fatalf("NAKs %+v, want 4..4", n)
	}
	if st := d.r.Stats(); st.Delivered != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestReceiver_RepairOfAnEpochWhoseCutIsUnknown: a receiver that missed
// every header of epoch 2 does not know where epoch 1 was cut, yet accepts
// a repair of epoch 1 up to that packet's stable (every failover keeps
// what was stable); before, such repairs were fenced forever and the
// receiver hung (the simulator's epoch scenario).
func TestReceiver_RepairOfAnEpochWhoseCutIsUnknown(t *testing.T) {
	one := newStream(t)
	three := newStream(t)
	three.epoch, three.epochStart = 3, 10
	d := &drive{t: t, r: newTest(t, testConfig())}
	d.step(0, Sequencer, one.packet(1, 1, 0, rec{payload: []byte("1")}))
	d.step(0, Sequencer, three.msgs(10, 1))
	one.flags = wire.PacketRetransmit
	d.step(0, Sequencer, one.packet(2, 5, 0, rec{payload: []byte("2")}, rec{payload: []byte("3")}, rec{payload: []byte("4")}, rec{payload: []byte("5")}, rec{payload: []byte("6")}))
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 5)) {
		t.Fatalf("delivered %v, stats %+v", got, d.r.Stats())
	}
	if d.r.Stats().Fenced != 1 { // seq 6: above the packet's stable, maybe cut
		t.Fatalf("stats %+v", d.r.Stats())
	}
}

// TestReceiver_SkippedEpochDropsHeldRecordsOfUnknownCut: a receiver that
// held a deposed primary's record and then missed a whole epoch does not
// know where the held record's epoch was cut, so the record may have been
// cut even below the newest epoch's start: it is dropped (and asked for
// again), never delivered as its old epoch's (two failovers in a row, sim
// seeds 1031 and 1048).
func TestReceiver_SkippedEpochDropsHeldRecordsOfUnknownCut(t *testing.T) {
	one, two, three := newStream(t), newStream(t), newStream(t)
	two.epoch, two.epochStart = 2, 5
	three.epoch, three.epochStart = 3, 6
	cfg := testConfig()
	cfg.Mode = Safe
	d := &drive{t: t, r: newTest(t, cfg)}
	d.step(0, Sequencer, one.packet(1, 3, 0, rec{payload: []byte("1")}, rec{payload: []byte("2")}, rec{payload: []byte("3")}))
	// Epoch 1 published 4 and 5 (4 lost here) but was cut at 4; epoch 2
	// published 5 and was cut at 5; epoch 3 starts at 6. This receiver
	// never hears of epoch 2.
	d.step(0, Sequencer, one.packet(5, 3, 0, rec{payload: []byte("cut")}))
	d.step(0, Sequencer, three.packet(6, 6, 0, rec{payload: []byte("6")}))
	one.flags = wire.PacketRetransmit
	d.step(0, Sequencer, one.packet(4, 4, 0, rec{payload: []byte("4")}))
	for _, m := range d.delivered {
		if m.Seq == 5 && m.Epoch == 1 {
			t.Fatalf("delivered seq 5 of epoch 1 (%q), which the cut lost; delivered %v", m.Payload, d.seqs())
		}
	}
	two.flags = wire.PacketRetransmit
	d.step(0, Sequencer, two.packet(5, 5, 0, rec{payload: []byte("5")}))
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 6)) {
		t.Fatalf("delivered %v", got)
	}
	if m := d.delivered[4]; m.Epoch != 2 || string(m.Payload) != "5" {
		t.Fatalf("seq 5: epoch %d %q, want epoch 2 \"5\"", m.Epoch, m.Payload)
	}
}

// TestReceiver_GapSizesAreCounted: Stats.GapSeqs adds up the seqs each
// gap was missing when found (seqd_gap_seqs_total: with Gaps, the mean
// gap size), not the held seqs around it.
func TestReceiver_GapSizesAreCounted(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, testConfig())}
	d.step(0, Sequencer, s.msgs(1, 2), s.msgs(10, 1)) // 3..9 missing
	d.tick(20 * ms)
	if st := d.r.Stats(); st.Gaps != 1 || st.GapSeqs != 7 {
		t.Fatalf("after a gap of 3..9: gaps=%d gap_seqs=%d, want 1 and 7", st.Gaps, st.GapSeqs)
	}
	d.step(21*ms, Sequencer, s.msgs(3, 7), s.msgs(11, 1), s.msgs(14, 1)) // 12..13 missing
	d.tick(40 * ms)
	if st := d.r.Stats(); st.Gaps != 2 || st.GapSeqs != 9 {
		t.Fatalf("after a second gap of 12..13: gaps=%d gap_seqs=%d, want 2 and 9", st.Gaps, st.GapSeqs)
	}
}
