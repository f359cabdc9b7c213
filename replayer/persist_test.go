package replayer

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// stableStream is mixed(n) with each packet's stable set to the stream's
// last seq at publish (as a standalone sequencer does) except that the
// last packet claims only the seq before its own last: its last record
// becomes stable by a heartbeat.
func stableStream(n int) (pkts [][]byte, hb []byte) {
	st := mixed(n)
	for _, p := range st.pkts {
		info := packetInfo(p)
		wire.SetStable(p, info.LastSeq())
	}
	last := lastSeq(st.pkts)
	wire.SetStable(st.pkts[len(st.pkts)-1], last-1)
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), st.epoch, st.session, last+1, last, 1000, st.epochStart)
	if err != nil {
		panic(err)
	}
	return st.pkts, hb
}

// persistRig is the service's persist path without sockets: a receiver
// that persists, and the persister feeding a store.
type persistRig struct {
	t *testing.T
	r *receiver.Receiver
	p Persister
	s *Store
}

func newPersistRig(t *testing.T) *persistRig {
	rc := receiver.DefaultConfig()
	rc.Persist, rc.Replayer, rc.Rewind, rc.RewindFrom = true, true, true, 1
	r, err := receiver.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	t.Cleanup(func() { s.Close() })
	g := &persistRig{t: t, r: r, s: s}
	g.p.Init(PersistConfig{MaxHeldBytes: 64 << 20, MaxPacketBytes: testConfig().MaxPacketBytes})
	return g
}

// step feeds one frame and handles Ready as Service.handleReady does.
func (g *persistRig) step(frame []byte) error {
	_ = g.r.Step(1, frame, receiver.Sequencer)
	rd := g.r.Ready()
	delivered := g.r.Next() - 1
	for _, f := range rd.Persist {
		if err := g.p.Offer(g.s, f, delivered); err != nil {
			return err
		}
	}
	err := g.p.Drain(g.s, delivered)
	g.r.Advance()
	return err
}

// TestPersister_OutOfOrderRepairsStoredInOrder: packets that arrive out
// of order (every 7th held back and "repaired" a few packets later,
// some twice) end in the store in stream order, each once, byte for byte
// as published, and only once stable: the last packet waits for the
// heartbeat that makes its last record stable.
func TestPersister_OutOfOrderRepairsStoredInOrder(t *testing.T) {
	pkts, hb := stableStream(3000)
	g := newPersistRig(t)
	var late [][]byte
	for i, p := range pkts {
		if i%7 == 3 && i < len(pkts)-1 {
			late = append(late, p)
			continue
		}
		if err := g.step(p); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if i%5 == 0 && len(late) > 0 {
			for _, l := range late {
				if err := g.step(l); err != nil {
					t.Fatalf("late packet: %v", err)
				}
			}
			if err := g.step(late[0]); err != nil { // a duplicate repair
				t.Fatalf("duplicate: %v", err)
			}
			late = late[:0]
		}
	}
	if got := g.s.Contiguous(); got >= lastSeq(pkts) {
		t.Fatalf("before the heartbeat the store holds up to %d: the last packet's last record is not stable yet", got)
	}
	if err := g.step(hb); err != nil {
		t.Fatal(err)
	}
	if got := g.s.Contiguous(); got != lastSeq(pkts) {
		t.Fatalf("store holds up to %d, want %d (persist stats %+v)", got, lastSeq(pkts), g.p.Stats())
	}
	got, _ := collect(g.s, 1, lastSeq(pkts))
	samePackets(t, "stored stream", got, pkts)
	st := g.p.Stats()
	if st.Held != 0 || st.HeldBytes != 0 || st.Direct == 0 || st.Appended != uint64(len(pkts)) {
		t.Fatalf("persist stats %+v, want every packet appended once, some directly, none held", st)
	}
}

// TestPersister_HoleThatNeverFillsIsAnError: a frame the receiver
// delivered that cannot follow the store (what is missing will never be
// persisted again) stops the persister with ErrHole naming the seqs,
// never a silent gap.
func TestPersister_HoleThatNeverFillsIsAnError(t *testing.T) {
	pkts, _ := stableStream(200)
	g := newPersistRig(t)
	// k..k+3 start with whole records: k+2 ends with one.
	k := 1
	for packetInfo(pkts[k]).Fragment || packetInfo(pkts[k+1]).Fragment || packetInfo(pkts[k+2]).Fragment || packetInfo(pkts[k+3]).Fragment {
		k++
	}
	for _, p := range pkts[:k+1] {
		if err := g.step(p); err != nil {
			t.Fatal(err)
		}
	}
	// pkts[k+1] reached the receiver but never the store (as if dropped).
	_ = g.r.Step(1, pkts[k+1], receiver.Sequencer)
	g.r.Advance()
	err := g.step(pkts[k+2])
	if !errors.Is(err, ErrHole) {
		t.Fatalf("step after a lost persist: %v, want ErrHole", err)
	}
	t.Log(err)
}

// TestPersister_PendingBound: frames held back for a hole beyond
// MaxPendingBytes stop the persister with ErrPendingFull.
func TestPersister_PendingBound(t *testing.T) {
	pkts, _ := stableStream(2000)
	g := newPersistRig(t)
	g.p.Init(PersistConfig{MaxHeldBytes: 8 << 10, MaxPacketBytes: testConfig().MaxPacketBytes})
	var err error
	for _, p := range pkts[1:] {
		if err = g.step(p); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrPendingFull) {
		t.Fatalf("holding %d packets behind a hole: %v, want ErrPendingFull", len(pkts)-1, err)
	}
}

// TestPersister_AllocatesNothing: persisting in-order stable packets
// (the steady state) and, once warm, packets held back behind a hole
// allocates nothing per packet.
func TestPersister_AllocatesNothing(t *testing.T) {
	pkts, _ := stableStream(40000)
	g := newPersistRig(t)
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 30 // no roll (a roll allocates)
	s, _ := mustOpen(t, t.TempDir(), cfg)
	defer s.Close()
	g.s = s
	i := 0
	// Warm up past the first epoch changes (a new epoch allocates).
	for ; i < len(pkts)*2/3+10; i++ {
		if err := g.step(pkts[i]); err != nil {
			t.Fatal(err)
		}
	}
	a := testing.AllocsPerRun(200, func() {
		if err := g.step(pkts[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if a != 0 {
		t.Fatalf("in order: %v allocations per packet, want 0", a)
	}
	// Out of order (the persister alone: the receiver buffers records out
	// of order with allocations of its own): four packets held back behind
	// a hole, then the hole.
	round := func() {
		info := packetInfo(pkts[i+4])
		last := info.LastSeq()
		for k := 1; k <= 4; k++ {
			if err := g.p.Offer(s, pkts[i+k], last); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.p.Offer(s, pkts[i], last); err != nil {
			t.Fatal(err)
		}
		if err := g.p.Drain(s, last); err != nil {
			t.Fatal(err)
		}
		i += 5
	}
	for k := 0; k < 10; k++ {
		round()
	}
	if a := testing.AllocsPerRun(100, round); a != 0 {
		t.Fatalf("out of order: %v allocations per round of 5 packets, want 0", a)
	}
}

// TestPersister_EpochCutRecordsNeverStored: a failover cuts epoch 1 at
// seq 7 while a packet of epoch 1 holding seqs 1..10 (stable 5) waits to
// be stored, and another of epoch 1 (seqs 8..10 again, never stable)
// arrives after the new primary's packet at the same seq: the store
// keeps seqs 1..7 of epoch 1 and 8..12 of epoch 2, the new primary's
// bytes, never a record the cut took back.
func TestPersister_EpochCutRecordsNeverStored(t *testing.T) {
	st := newStream()
	for i := 0; i < 10; i++ {
		st.msg(100)
	}
	st.flush()
	p1 := st.pkts[0]
	wire.SetStable(p1, 5)
	old := bytes.Clone(p1) // the deposed primary resends 8..10 alone
	{
		var w wire.PacketWriter
		var in wire.Packet
		var r wire.Record
		if err := wire.DecodePacket(p1, &in); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1472)
		if err := w.Reset(buf, wire.KindData, 1, testSession, 8, in.BaseTime, 1); err != nil {
			t.Fatal(err)
		}
		for in.Next(&r) {
			if r.Seq >= 8 {
				if err := w.Append(&r); err != nil {
					t.Fatal(err)
				}
			}
		}
		old = bytes.Clone(w.Bytes())
		wire.SetStable(old, 5)
	}
	st.pkts = st.pkts[:0]
	st.next = 8
	st.newEpoch() // epoch 2 starts at 8: the cut is 7
	for i := 0; i < 5; i++ {
		st.msg(60)
	}
	st.flush()
	q := st.pkts[0]
	wire.SetStable(q, 12)

	g := newPersistRig(t)
	for i, f := range [][]byte{p1, q, old} {
		if err := g.step(f); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if got := g.s.Contiguous(); got != 12 {
		t.Fatalf("store holds up to %d, want 12 (stats %+v)", got, g.p.Stats())
	}
	if e := g.s.Epochs(); len(e) != 2 || e[1] != (Epoch{Epoch: 2, Start: 8}) {
		t.Fatalf("epochs %+v, want epoch 2 from seq 8", e)
	}
	var seen []uint64
	g.s.Records(1, 12, func(r *wire.Record, epoch uint32) bool {
		want := uint32(1)
		if r.Seq >= 8 {
			want = 2
		}
		if epoch != want || (r.Seq >= 8 && len(r.Payload) != 60) {
			t.Fatalf("seq %d: epoch %d, %d bytes; want epoch %d (the new primary's record)", r.Seq, epoch, len(r.Payload), want)
		}
		seen = append(seen, r.Seq)
		return true
	})
	if len(seen) != 12 {
		t.Fatalf("records %v, want 1..12", seen)
	}
	if g.p.Stats().Cut == 0 {
		t.Fatalf("stats %+v: no packet was cut", g.p.Stats())
	}
}

// TestPersister_CatchUpKeepsNothingAboveTheLimit: a Persister that stores
// on arrival (a standby's: FromSeqOne, WaitForGaps) holds what an empty
// store cannot take first, and a catch-up to a cut (AppendTo) fills the
// gap, drains what waited up to the cut, stores the packet that
// straddles it without the records above, and drops the rest.
func TestPersister_CatchUpKeepsNothingAboveTheLimit(t *testing.T) {
	st := newStream()
	for range 40 {
		st.msg(300)
	}
	st.flush()
	pkts := st.pkts
	if len(pkts) < 8 {
		t.Fatalf("%d packets: the test needs 8", len(pkts))
	}
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	t.Cleanup(func() { s.Close() })
	var p Persister
	p.Init(PersistConfig{MaxHeldBytes: 1 << 20, MaxPacketBytes: testConfig().MaxPacketBytes, FromSeqOne: true, WaitForGaps: true})
	for _, f := range pkts[1:] {
		if err := p.Offer(s, f, ^uint64(0)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Contiguous(); got != 0 || p.Stats().Holds != uint64(len(pkts)-1) {
		t.Fatalf("an empty store took seq %d first (holds %d): it takes seq 1 first", got, p.Stats().Holds)
	}
	i5 := packetInfo(pkts[5])
	limit := i5.FirstSeq + 1
	if err := p.AppendTo(s, pkts[0], limit); err != nil {
		t.Fatal(err)
	}
	if got := s.Contiguous(); got != limit {
		t.Fatalf("store holds up to %d, want the limit %d", got, limit)
	}
	if st := p.Stats(); st.Held != 0 || st.Cut != 1 || st.Appended != 6 {
		t.Fatalf("stats %+v: want nothing held, one packet cut, six appended", st)
	}
	got, _ := collect(s, 1, limit)
	samePackets(t, "stored below the cut", got[:5], pkts[:5])
	var last wire.Packet
	if err := wire.DecodePacket(got[5], &last); err != nil {
		t.Fatal(err)
	}
	if last.LastSeq() != limit || last.Stable > limit {
		t.Fatalf("the straddling packet ends at %d with stable %d, want %d and at most %d", last.LastSeq(), last.Stable, limit, limit)
	}
}
