package receiver

import (
	"errors"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// history is a stored stream: packets of 5 messages, epochs starting at
// the given seqs, each packet's stable lagging its last seq by lag.
func history(t *testing.T, last uint64, starts []uint64, lag uint64) (pkts [][]byte, live func(first uint64) []byte) {
	s := newStream(t)
	epochAt := func(q uint64) (uint32, uint64) {
		e, st := uint32(0), uint64(1)
		for i, x := range starts {
			if q >= x {
				e, st = uint32(i+1), x
			}
		}
		return e, st
	}
	build := func(first uint64, n int, stableLag uint64) []byte {
		s.epoch, s.epochStart = epochAt(first)
		p := s.msgs(first, n)
		_, st := epochAt(first)
		stable := first + uint64(n) - 1 - stableLag
		if stable < st {
			stable = st - 1
		}
		setStable(p, stable)
		return p
	}
	for q := uint64(1); q <= last; q += 5 {
		n := 5
		for _, x := range starts {
			// A packet never straddles an epoch start.
			if q < x && q+5 > x {
				n = int(x - q)
			}
		}
		pkts = append(pkts, build(q, n, lag))
		q = q + uint64(n) - 5
	}
	return pkts, func(first uint64) []byte { return build(first, 5, 0) }
}

func setStable(p []byte, stable uint64) {
	le64put(p[32:], stable)
}

func le64put(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// TestReceiver_RewindMergesOntoLiveStream: a late joiner rewinds from seq
// 1 across two epoch changes while the live stream runs ahead of its ring
// (live packets beyond it are dropped); the rewind brings everything in
// order, stored packets of old epochs are accepted even though their
// stable lags and the next epoch's start is not yet known, no NAK goes out
// while rewinding, and every seq is delivered once, in order.
func TestReceiver_RewindMergesOntoLiveStream(t *testing.T) {
	starts := []uint64{1, 1001, 2001}
	stored, livePkt := history(t, 3000, starts, 3)
	cfg := testConfig()
	cfg.Mode = Safe
	d := &drive{t: t, r: newTest(t, cfg)}
	d.r.SetRewinding(true)
	now := int64(1)
	liveNext := uint64(2501)
	live := func() {
		if err := d.step(now, Sequencer, livePkt(liveNext)); err != nil {
			t.Fatal(err)
		}
		liveNext += 5
	}
	// Before the live stream starts the receiver, a rewind packet is kept.
	if err := d.r.StepRewind(now, stored[0]); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("StepRewind before live: %v, want ErrNotStarted", err)
	}
	for i := 0; i < 300; i++ { // far beyond the 1024-record ring
		live()
		now += 1e6
		d.tick(now)
	}
	if d.r.FirstLive() != 2501 || len(d.delivered) != 0 {
		t.Fatalf("first live %d, delivered %d", d.r.FirstLive(), len(d.delivered))
	}
	if d.r.Stats().Overflow == 0 {
		t.Fatal("no live record overflowed the ring: the test must exercise it")
	}
	// Rewind stored packets then beyond them, five per live packet.
	q := 0
	for d.r.Next() < liveNext {
		for k := 0; k < 5; k++ {
			var p []byte
			if q < len(stored) {
				p = stored[q]
			} else {
				p = livePkt(3001 + uint64(q-len(stored))*5) // the store follows the live stream
			}
			q++
			if err := d.r.StepRewind(now, p); err != nil {
				t.Fatal(err)
			}
			d.collect()
		}
		live()
		now += 1e6
		d.tick(now)
		if q > 10000 {
			t.Fatalf("rewind never caught up: next %d, live %d", d.r.Next(), liveNext)
		}
	}
	d.r.SetRewinding(false)
	for i := 0; i < 10; i++ {
		live()
		now += 1e6
		d.tick(now)
	}
	if n := len(d.naks()); n != 0 {
		t.Fatalf("%d NAKs sent", n)
	}
	want := seqRange(1, liveNext-1)
	got := d.seqs()
	if len(got) != len(want) {
		t.Fatalf("delivered %d messages, want %d (next %d)", len(got), len(want), d.r.Next())
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("delivered[%d] = %d, want %d", i, got[i], want[i])
		}
	}
	for _, m := range d.delivered {
		e := uint32(1)
		if m.Seq >= 1001 {
			e = 2
		}
		if m.Seq >= 2001 {
			e = 3
		}
		if m.Epoch != e {
			t.Fatalf("seq %d delivered in epoch %d, want %d", m.Seq, m.Epoch, e)
		}
	}
}

// TestReceiver_RewindingReportsReadOnly: while a rewind stream is open a
// node that sends commands reports read-only, so flow control does not
// wait for it; once closed it counts again.
func TestReceiver_RewindingReportsReadOnly(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.StatusInterval = time.Duration(10 * ms)
	cfg.Account = wire.MustAccount("late")
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	d.r.SetRewinding(true)
	d.step(0, Sequencer, s.msgs(100, 3))
	d.tick(0)
	d.r.SetRewinding(false)
	d.step(20*ms, Sequencer, s.msgs(103, 3))
	d.tick(20 * ms)
	var flags []uint16
	for _, x := range d.sent {
		if x.kind == wire.KindStatus {
			flags = append(flags, x.status.Flags)
		}
	}
	if len(flags) != 2 || flags[0] != wire.StatusReadOnly || flags[1] != 0 {
		t.Fatalf("status flags %v, want [ReadOnly 0]", flags)
	}
}
