package receiver

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seqd/seqd/wire"
)

// lagStream publishes n small messages of one epoch in packets of per
// records, each packet's stable lag seqs behind its first record (a
// sequencer group: the standbys ack what was published before).
func lagStream(s *stream, first uint64, n, per int, lag uint64) [][]byte {
	var out [][]byte
	for q := first; q < first+uint64(n); q += uint64(per) {
		var recs []rec
		for k := 0; k < per && q+uint64(k) < first+uint64(n); k++ {
			recs = append(recs, rec{payload: fmt.Appendf(nil, "e%d-%d", s.epoch, q+uint64(k)), account: wire.MustAccount("other"), cmdSeq: q + uint64(k)})
		}
		out = append(out, s.packet(q, max(q, lag+1)-lag-1, int64(q)*1000, recs...))
	}
	return out
}

func holdConfig(hold int) Config {
	c := testConfig()
	c.Mode = Safe
	c.HoldBytes = hold
	return c
}

func TestReceiver_SafeHoldsPacketsNotRecords(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, holdConfig(DefaultConfig().HoldBytes))}
	pkts := lagStream(s, 1, 100, 5, 7)
	for _, p := range pkts {
		if err := d.step(0, Sequencer, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.step(0, Sequencer, s.heartbeat(101, 100, 0)); err != nil {
		t.Fatal(err)
	}
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 100)) {
		t.Fatalf("delivered %v", got)
	}
	for _, m := range d.delivered {
		if want := fmt.Sprintf("e1-%d", m.Seq); string(m.Payload) != want || m.Epoch != 1 {
			t.Fatalf("seq %d: %q epoch %d, want %q epoch 1", m.Seq, m.Payload, m.Epoch, want)
		}
	}
	st := d.r.Stats()
	if st.HeldPackets != uint64(len(pkts)) || d.r.maxStored != 0 {
		t.Fatalf("held %d packets of %d, ring used up to %d: want every packet held, the ring untouched", st.HeldPackets, len(pkts), d.r.maxStored)
	}
}

func TestReceiver_HoldResumesAfterAGap(t *testing.T) {
	// A packet lost while stable lags: the packets after it go to the
	// ring, and under steady load next never catches up with the ring
	// (stable always lags the newest record). Once the gap is repaired,
	// the hold takes the next in-order run after the ring's contents, so
	// one loss does not cost the hold for the rest of the stream.
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, holdConfig(DefaultConfig().HoldBytes))}
	pkts := lagStream(s, 1, 200, 5, 12)
	for i, p := range pkts {
		if i == 2 {
			continue // lost
		}
		if err := d.step(0, Sequencer, p); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			if err := d.step(0, Sequencer, pkts[2]); err != nil { // the repair
				t.Fatal(err)
			}
		}
	}
	if err := d.step(0, Sequencer, s.heartbeat(201, 200, 0)); err != nil {
		t.Fatal(err)
	}
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 200)) {
		t.Fatalf("delivered %v", got)
	}
	if held := d.r.Stats().HeldPackets; held < uint64(len(pkts))-12 {
		t.Fatalf("%d of %d packets held: the hold did not resume after the gap", held, len(pkts))
	}
}

func TestReceiver_HeldPayloadsStayValidUntilAdvance(t *testing.T) {
	// A shell may step many packets before Advance: the arena must not
	// reuse a packet whose records the Ready still views, even when it
	// wraps.
	s := newStream(t)
	r := newTest(t, holdConfig(minHoldBytes))
	big := make([]byte, 1000)
	next := uint64(1)
	for round := 0; round < 50; round++ {
		for k := 0; k < 20; k++ {
			for i := range big {
				big[i] = byte(next)
			}
			if err := r.Step(0, s.packet(next, next-1, 0, rec{payload: big}), Sequencer); err != nil {
				t.Fatal(err)
			}
			next++
		}
		for _, m := range r.Ready().Deliver {
			if m.Payload[0] != byte(m.Seq) || m.Payload[999] != byte(m.Seq) {
				t.Fatalf("round %d seq %d: payload of seq %d", round, m.Seq, m.Payload[0])
			}
		}
		r.Advance()
	}
	if r.Next() != next-1 || r.Stats().HeldPackets == 0 {
		t.Fatalf("next %d want %d, stats %+v", r.Next(), next-1, r.Stats())
	}
}

func TestReceiver_NewEpochDropsHeldRecordsAboveTheCut(t *testing.T) {
	s := newStream(t)
	d := &drive{t: t, r: newTest(t, holdConfig(DefaultConfig().HoldBytes))}
	for _, p := range lagStream(s, 1, 20, 4, 6) { // stable reaches 12
		if err := d.step(0, Sequencer, p); err != nil {
			t.Fatal(err)
		}
	}
	if d.r.hold.end != 21 {
		t.Fatalf("held up to %d, want 20", d.r.hold.end-1)
	}
	// The new primary cut epoch 1 at 15: 16..20 of epoch 1 were never
	// stable; epoch 2 publishes its own from 16.
	s2 := newStream(t)
	s2.epoch, s2.epochStart = 2, 16
	for _, p := range lagStream(s2, 16, 10, 3, 0) {
		if err := d.step(0, Sequencer, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.step(0, Sequencer, s.packet(13, 12, 0, rec{payload: []byte("e1-13")}, rec{payload: []byte("e1-14")}, rec{payload: []byte("e1-15")})); err != nil {
		t.Fatal(err)
	}
	if err := d.step(0, Sequencer, s2.heartbeat(26, 25, 0)); err != nil {
		t.Fatal(err)
	}
	if got := d.seqs(); !slices.Equal(got, seqRange(1, 25)) {
		t.Fatalf("delivered %v", got)
	}
	for _, m := range d.delivered {
		e := uint32(1)
		if m.Seq >= 16 {
			e = 2
		}
		if want := fmt.Sprintf("e%d-%d", e, m.Seq); string(m.Payload) != want || m.Epoch != e {
			t.Fatalf("seq %d: %q epoch %d, want %q epoch %d", m.Seq, m.Payload, m.Epoch, want, e)
		}
	}
	if d.r.Stats().DroppedByEpoch != 5 {
		t.Fatalf("dropped by epoch %d, want 5 (16..20 of epoch 1)", d.r.Stats().DroppedByEpoch)
	}
}

// TestReceiver_HoldIsInvisible drives a receiver that holds packets and
// one that copies records into the ring with the same random input (a
// lagging stable, loss, duplicates, reordering, fragments, a failover
// that cuts records, batches of steps before Advance, NAK timers): they
// must deliver the same messages and send the same frames, and the
// stream must be the true one.
func TestReceiver_HoldIsInvisible(t *testing.T) {
	holding := 0
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if holdDifferential(t, seed) > 0 {
				holding++
			}
		})
	}
	if holding < 200 {
		t.Fatalf("%d seeds of 300 held packets: the test does not exercise the hold", holding)
	}
}

// holdDifferential runs one seed and returns how many packets the hold took.
func holdDifferential(t *testing.T, seed uint64) uint64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	truth := map[uint64][]byte{}
	var pkts [][]byte
	// publish n messages from first on; every few a large one in
	// fragments of its own packets.
	publish := func(s *stream, first uint64, n int, maxStable func(q uint64) uint64, recordTruth bool) {
		q := first
		for q < first+uint64(n) {
			stable := min(q-1-min(q-1, uint64(rng.IntN(30))), maxStable(q))
			if rng.IntN(12) == 0 {
				msg := make([]byte, 600+rng.IntN(900))
				for i := range msg {
					msg[i] = byte(rng.Uint32())
				}
				if recordTruth {
					truth[q] = msg
				}
				for off := 0; off < len(msg); off += 500 {
					end := min(off+500, len(msg))
					pkts = append(pkts, s.packet(q, stable, int64(q), rec{payload: msg[off:end], account: wire.MustAccount("big"),
						flags: wire.FlagFragment, total: uint32(len(msg)), offset: uint32(off), cmdSeq: q}))
				}
				q++
				continue
			}
			var recs []rec
			for k := 0; k < 1+rng.IntN(6) && q+uint64(k) < first+uint64(n); k++ {
				p := fmt.Appendf(nil, "e%d-%d-%d", s.epoch, q+uint64(k), rng.Uint32())
				if recordTruth {
					truth[q+uint64(k)] = p
				}
				recs = append(recs, rec{payload: p, account: wire.MustAccount("other"), cmdSeq: q + uint64(k)})
			}
			pkts = append(pkts, s.packet(q, stable, int64(q), recs...))
			q += uint64(len(recs))
		}
	}
	s1 := newStream(t)
	n1 := 150 + rng.IntN(200)
	cut := uint64(n1 - rng.IntN(40))
	// Epoch 1's stable never passes the cut (the failover keeps every
	// stable seq); what it published above the cut is not the stream.
	publish(s1, 1, int(cut), func(uint64) uint64 { return cut }, true)
	publish(s1, cut+1, n1-int(cut), func(uint64) uint64 { return cut }, false)
	s2 := newStream(t)
	s2.epoch, s2.epochStart = 2, cut+1
	n2 := 100 + rng.IntN(200)
	publish(s2, cut+1, n2, func(q uint64) uint64 { return q }, true)
	last := cut + uint64(n2)

	// The network: each packet lost (and resent a little later, as a
	// repair would be), doubled or swapped with the one before, at
	// random; some seeds lose nothing.
	var input [][]byte
	type delayed struct {
		at int
		p  []byte
	}
	var later []delayed
	lossy := seed%3 != 0
	for i, p := range pkts {
		for len(later) > 0 && later[0].at <= i {
			input = append(input, later[0].p)
			later = later[1:]
		}
		switch x := rng.IntN(20); {
		case x == 0 && lossy:
			later = append(later, delayed{at: i + 5 + rng.IntN(30), p: p})
		case x == 1:
			input = append(input, p, p)
		case x == 2 && len(input) > 0:
			input = append(input[:len(input)-1], p, input[len(input)-1])
		default:
			input = append(input, p)
		}
	}
	for _, d := range later {
		input = append(input, d.p)
	}
	input = append(input, s2.heartbeat(last+1, last, 0))
	for q := uint64(1); q <= last; q += 4 {
		// Repairs of everything, in the true stream's packets.
		var recs []rec
		for k := q; k < q+4 && k <= last; k++ {
			if len(truth[k]) > 500 {
				break
			}
			recs = append(recs, rec{payload: truth[k], account: wire.MustAccount("other"), cmdSeq: k})
		}
		if len(recs) == 0 {
			continue
		}
		s := s2
		if q+uint64(len(recs))-1 <= cut {
			s = s1
		} else if q <= cut {
			continue
		}
		input = append(input, s.packet(q, min(q-1, cut), int64(q), recs...))
	}
	for q := uint64(1); q <= last; q++ {
		if msg := truth[q]; len(msg) > 500 {
			s := s2
			if q <= cut {
				s = s1
			}
			for off := 0; off < len(msg); off += 500 {
				end := min(off+500, len(msg))
				input = append(input, s.packet(q, min(q-1, cut), int64(q), rec{payload: msg[off:end], account: wire.MustAccount("big"),
					flags: wire.FlagFragment, total: uint32(len(msg)), offset: uint32(off), cmdSeq: q}))
			}
		}
	}
	input = append(input, s2.heartbeat(last+1, last, 0))

	ring := holdConfig(0)
	held := holdConfig(minHoldBytes) // small: it wraps and fills
	for _, c := range []*Config{&ring, &held} {
		c.PendingRecords = 1 << 12
		c.MaxReceiveMessageBytes = 1 << 16
		c.MaxReassemblyBytes = 1 << 20
	}
	a := &drive{t: t, r: newTest(t, ring)}
	b := &drive{t: t, r: newTest(t, held)}
	now := int64(0)
	for i := 0; i < len(input); {
		batch := 1 + rng.IntN(8)
		for k := 0; k < batch && i < len(input); k, i = k+1, i+1 {
			errA := a.r.Step(now, input[i], Sequencer)
			errB := b.r.Step(now, input[i], Sequencer)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("input %d: errors %v and %v", i, errA, errB)
			}
		}
		now += int64(rng.IntN(2_000_000))
		a.r.Tick(now)
		b.r.Tick(now)
		if a.r.Contiguous() != b.r.Contiguous() || a.r.Next() != b.r.Next() {
			t.Fatalf("input %d: ring next %d contiguous %d, hold next %d contiguous %d", i, a.r.Next(), a.r.Contiguous(), b.r.Next(), b.r.Contiguous())
		}
		sa, sb := a.sent, b.sent
		a.collect()
		b.collect()
		if len(a.sent) != len(b.sent) || !slices.Equal(a.seqs(), b.seqs()) {
			t.Fatalf("input %d: ring sent %v delivered %v, hold sent %v delivered %v", i, a.sent[len(sa):], a.seqs(), b.sent[len(sb):], b.seqs())
		}
	}
	if a.r.Err() != nil || b.r.Err() != nil {
		t.Fatalf("errors %v, %v", a.r.Err(), b.r.Err())
	}
	if got := b.seqs(); !slices.Equal(got, seqRange(1, last)) {
		t.Fatalf("delivered %v, want 1..%d (cut %d)", got, last, cut)
	}
	for i, m := range b.delivered {
		if !bytes.Equal(m.Payload, truth[m.Seq]) || !bytes.Equal(a.delivered[i].Payload, m.Payload) {
			t.Fatalf("seq %d: %q, ring %q, want %q", m.Seq, m.Payload, a.delivered[i].Payload, truth[m.Seq])
		}
		if e := uint32(1 + min(1, m.Seq/(cut+1))); m.Epoch != e {
			t.Fatalf("seq %d in epoch %d, want %d", m.Seq, m.Epoch, e)
		}
	}
	return b.r.Stats().HeldPackets
}
