package replayer

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// cutStream is a stream whose epoch 1 published seqs 1..n but was cut at
// cut by a failover: epoch 2 starts at cut+1 and publishes other messages
// with seqs cut+1..m. Sizes mix whole and fragmented messages.
func cutStream(n, cut, m int) *stream {
	st := newStream()
	size := func(i int) int {
		switch {
		case i%97 == 5:
			return 5000 + i%300
		case i%13 == 0:
			return 900
		}
		return 40 + i%200
	}
	for i := 1; i <= n; i++ {
		st.msg(size(i))
	}
	st.restartEpoch(uint64(cut + 1))
	for i := cut + 1; i <= m; i++ {
		st.msg(size(i))
	}
	st.flush()
	return st
}

// wantRecord is the payload seq has in the surviving stream.
func wantPayload(seq uint64, size int, cut uint64) []byte {
	p := payload(seq, size)
	if seq > cut {
		for i := range p {
			p[i] ^= 0x22 // salt of epoch 2
		}
	}
	return p
}

// survivor follows the records of cutStream's surviving stream, served
// in order from seq next: each seq once, its fragments in order, and each
// whole message with its epoch's payload.
type survivor struct {
	where string // the reader, for failures
	cut   uint64
	next  uint64
	msg   []byte
}

// add checks that r is the next record of the surviving stream, and the
// message it completes, if any.
func (v *survivor) add(t *testing.T, r *wire.Record) {
	t.Helper()
	if r.Seq != v.next || uint32(len(v.msg)) != r.Offset {
		t.Fatalf("%s: seq %d offset %d, want seq %d offset %d", v.where, r.Seq, r.Offset, v.next, len(v.msg))
	}
	if r.Fragment() {
		v.msg = append(v.msg, r.Payload...)
		if uint32(len(v.msg)) < r.Total {
			return
		}
	} else {
		v.msg = append(v.msg[:0], r.Payload...)
	}
	if !bytes.Equal(v.msg, wantPayload(r.Seq, len(v.msg), v.cut)) {
		t.Fatalf("%s: seq %d: the bytes of the cut epoch 1 are served", v.where, r.Seq)
	}
	v.msg, v.next = v.msg[:0], v.next+1
}

// checkRecords walks from..to and checks that every seq comes once, whole,
// with the payload and epoch of the surviving stream.
func checkRecords(t *testing.T, s *Store, from, to, cut uint64) {
	t.Helper()
	v := survivor{where: fmt.Sprintf("Records(%d, %d)", from, to), cut: cut, next: from}
	s.Records(from, to, func(r *wire.Record, epoch uint32) bool {
		want := uint32(1)
		if r.Seq > cut {
			want = 2
		}
		if epoch != want {
			t.Fatalf("seq %d: epoch %d, want %d", r.Seq, epoch, want)
		}
		v.add(t, r)
		return true
	})
	if v.next != to+1 {
		t.Fatalf("Records(%d, %d) ended before seq %d", from, to, v.next)
	}
}

// checkSurviving checks that s holds cutStream's surviving stream up to
// m: both epochs, the records around the cut, and no packet of epoch 1
// above the cut served by Range.
func checkSurviving(t *testing.T, s *Store, m, cut uint64) {
	t.Helper()
	if c := s.Contiguous(); c != m {
		t.Fatalf("Contiguous = %d, want %d", c, m)
	}
	if e := s.Epochs(); len(e) != 2 || e[1] != (Epoch{2, cut + 1}) {
		t.Fatalf("Epochs = %+v", e)
	}
	checkRecords(t, s, 1, m, cut)
	checkRecords(t, s, cut-50, cut+50, cut)
	// Range serves no packet of epoch 1 that holds only cut records.
	var p wire.Packet
	s.Range(cut-100, cut+100, func(pkt []byte, _ sequencer.PacketInfo) bool {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch == 1 && p.FirstSeq > cut {
			t.Fatalf("Range served epoch 1's packet at seq %d, above its cut %d", p.FirstSeq, cut)
		}
		return true
	})
}

// reopen opens the store in dir again and checks that it recovered
// nothing corrupt and cut nothing.
func reopen(t *testing.T, dir string, cfg Config, what string) *Store {
	t.Helper()
	s, rec := mustOpen(t, dir, cfg)
	if rec.Corrupt != nil || len(rec.Cuts) != 0 {
		t.Fatalf("%s: %v", what, rec)
	}
	return s
}

// TestStore_EpochRestartBelowTail: a store that holds epoch 1 past its cut
// (a replayer or standby that got the deposed primary's last packets)
// takes epoch 2's packets from the cut on, keeps the cut frames on disk as
// they were received, and never serves their records: Records and Range
// yield the surviving stream, also after a reopen and read-only.
func TestStore_EpochRestartBelowTail(t *testing.T) {
	onEachFS(t, testStoreEpochRestartBelowTail)
}

func testStoreEpochRestartBelowTail(t *testing.T, base Config, root string) {
	const n, cut, m = 2000, 1800, 3000
	st := cutStream(n, cut, m)
	dir := filepath.Join(root, "1")
	s, _ := mustOpen(t, dir, base)
	appendAll(t, s, st.pkts)
	check := func(s *Store) {
		t.Helper()
		checkSurviving(t, s, m, cut)
		checkRecords(t, s, cut+1, cut+1, cut)
		checkRecords(t, s, n-3, n+3, cut)
		fn := func(*wire.Record, uint32) bool { return true }
		if a := testing.AllocsPerRun(20, func() { s.Records(cut-100, cut+100, fn) }); a != 0 {
			t.Fatalf("Records across the restart allocates %v", a)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, dir, base, "reopen")
	check(s)
	s.Close()
	cfg := base
	cfg.ReadOnly = true
	s, _ = mustOpen(t, dir, cfg)
	check(s)
	s.Close()
}

// TestStore_EpochRestartRefusals: only the first packet of a newer epoch,
// starting at its epoch start within what is held, restarts the stream.
func TestStore_EpochRestartRefusals(t *testing.T) {
	onEachFS(t, testStoreEpochRestartRefusals)
}

func testStoreEpochRestartRefusals(t *testing.T, base Config, root string) {
	st := cutStream(300, 250, 400)
	first := firstOfEpoch(t, st.pkts, 2)
	s, _ := mustOpen(t, filepath.Join(root, "1"), base)
	defer s.Close()
	appendAll(t, s, st.pkts[:first])
	// The second packet of epoch 2 does not start at the epoch start.
	if err := s.Append(st.pkts[first+1]); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("epoch 2's second packet first: %v, want ErrDuplicate", err)
	}
	// An old epoch's packet is still a duplicate.
	if err := s.Append(st.pkts[first-1]); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("epoch 1 again: %v, want ErrDuplicate", err)
	}
	appendAll(t, s, st.pkts[first:])
	// Epoch 2 again from its start: epoch 2 is no newer than what is held.
	if err := s.Append(st.pkts[first]); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("epoch 2's start again: %v, want ErrDuplicate", err)
	}
	if c := s.Contiguous(); c != 400 {
		t.Fatalf("Contiguous = %d", c)
	}
}

// TestStore_BeginEpochCutsTheDeposedTail: a standby that holds epoch 1
// past its cut (the deposed primary's last packets) learns that epoch 2
// began at cut+1 without having epoch 2's first packet (it healed on a
// later one). BeginEpoch records the start: the records from it on are
// no longer held (Contiguous is the cut, epoch 2's later packets wait
// for the first: ErrGap), the epoch table has epoch 2, a reopen keeps
// both, and once epoch 2's packets come the store serves the surviving
// stream, as after a restart by the epoch's first packet. Without it the
// store kept epoch 1's cut records as held, and a later epoch's first
// packet followed them (sim seed 1457).
func TestStore_BeginEpochCutsTheDeposedTail(t *testing.T) {
	onEachFS(t, testStoreBeginEpochCutsTheDeposedTail)
}

func testStoreBeginEpochCutsTheDeposedTail(t *testing.T, base Config, root string) {
	const n, cut, m = 2000, 1800, 3000
	st := cutStream(n, cut, m)
	first := firstOfEpoch(t, st.pkts, 2)
	dir := filepath.Join(root, "1")
	cfg := base
	cfg.Sync = SyncAlways
	s, _ := mustOpen(t, dir, cfg)
	appendAll(t, s, st.pkts[:first])
	if err := s.Append(st.pkts[first+1]); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("epoch 2's second packet over the cut tail: %v, want ErrDuplicate", err)
	}
	if err := s.BeginEpoch(2, cut+1); err != nil {
		t.Fatalf("BeginEpoch: %v", err)
	}
	begun := func(s *Store) {
		t.Helper()
		if c, d := s.Contiguous(), s.Durable(); c != cut || d > cut {
			t.Fatalf("after BeginEpoch(2, %d): Contiguous %d, Durable %d, want %d and no more", cut+1, c, d, cut)
		}
		if e := s.Epochs(); len(e) != 2 || e[1] != (Epoch{2, cut + 1}) {
			t.Fatalf("Epochs = %+v", e)
		}
		if e, ok := s.EpochOf(cut + 1); ok {
			t.Fatalf("EpochOf(%d) = %d: a cut record is still held", cut+1, e)
		}
		pkts, _ := collect(s, cut+1, n)
		if len(pkts) != 0 {
			t.Fatalf("Range past the epoch start served %d packets", len(pkts))
		}
		checkRecords(t, s, 1, cut, cut)
	}
	begun(s)
	if err := s.BeginEpoch(2, cut+1); err != nil {
		t.Fatalf("BeginEpoch again: %v", err)
	}
	if err := s.Append(st.pkts[first+1]); !errors.Is(err, ErrGap) {
		t.Fatalf("epoch 2's second packet before its first: %v, want ErrGap", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, dir, cfg, "reopen after BeginEpoch")
	begun(s)
	appendAll(t, s, st.pkts[first:])
	check := func(s *Store) {
		t.Helper()
		checkSurviving(t, s, m, cut)
		checkReadersFrom(t, s, m, cut, 1, cut-50, cut+1, n+1)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, dir, cfg, "reopen")
	check(s)
	s.Close()
	ro := cfg
	ro.ReadOnly = true
	s, _ = mustOpen(t, dir, ro)
	check(s)
	s.Close()
}

// TestStore_BeginEpochRefusals: an epoch start is recorded only where the
// store could take that epoch's first packet: within what it holds (or
// right after it), above its oldest seq, for an epoch newer than every
// one held, not below the newest epoch's start.
func TestStore_BeginEpochRefusals(t *testing.T) {
	onEachFS(t, testStoreBeginEpochRefusals)
}

func testStoreBeginEpochRefusals(t *testing.T, base Config, root string) {
	empty, _ := mustOpen(t, filepath.Join(root, "1"), base)
	defer empty.Close()
	if err := empty.BeginEpoch(2, 1); !errors.Is(err, ErrGap) {
		t.Fatalf("empty store: %v, want ErrGap", err)
	}
	st := cutStream(300, 250, 400)
	first := firstOfEpoch(t, st.pkts, 2)
	s, _ := mustOpen(t, filepath.Join(root, "2"), base)
	defer s.Close()
	appendAll(t, s, st.pkts[:first])
	for _, tc := range []struct {
		epoch uint32
		start uint64
		want  error
	}{
		{2, 302, ErrGap},        // past what is held: a seq would be missing
		{1, 200, ErrEpochStart}, // not newer than the epochs held
		{2, 1, ErrEpochStart},   // at the oldest seq: nothing would be left
		{2, 301, nil},           // right after what is held: nothing cut
		{3, 300, ErrEpochStart}, // below the newest epoch's start
		{2, 290, ErrEpochStart}, // epoch 2 is known, at another seq
		{3, 301, nil},           // an empty epoch 2
	} {
		if err := s.BeginEpoch(tc.epoch, tc.start); !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Fatalf("BeginEpoch(%d, %d): %v, want %v", tc.epoch, tc.start, err, tc.want)
		}
	}
	if c := s.Contiguous(); c != 300 {
		t.Fatalf("Contiguous = %d, want 300", c)
	}
}

// firstOfEpoch is the index of the first packet of epoch e in pkts.
func firstOfEpoch(t *testing.T, pkts [][]byte, e uint32) int {
	t.Helper()
	var p wire.Packet
	for i, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch == e {
			return i
		}
	}
	t.Fatalf("no packet of epoch %d", e)
	return 0
}

// TestStore_RangeSaysWhereAPacketsEpochEnded: Range describes a packet of
// an epoch the table follows with the next one by that epoch's end (the
// cut: a primary stamps the packet's stable no higher), and a packet of
// the newest epoch, or of one whose successor the table lacks, by 0.
func TestStore_RangeSaysWhereAPacketsEpochEnded(t *testing.T) {
	onEachFS(t, testStoreRangeSaysWhereAPacketsEpochEnded)
}

func testStoreRangeSaysWhereAPacketsEpochEnded(t *testing.T, base Config, root string) {
	const n, cut, m = 300, 250, 400
	st := cutStream(n, cut, m)
	s, _ := mustOpen(t, filepath.Join(root, "1"), base)
	defer s.Close()
	appendAll(t, s, st.pkts)
	var seen [3]int
	s.Range(1, m, func(pkt []byte, info sequencer.PacketInfo) bool {
		e := packetEpoch(pkt)
		want := uint64(0)
		if e == 1 {
			want = cut
		}
		if info.EpochEnd != want {
			t.Fatalf("packet of epoch %d at seq %d: EpochEnd %d, want %d", e, info.FirstSeq, info.EpochEnd, want)
		}
		seen[e]++
		return true
	})
	if seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("packets seen per epoch: %v", seen[1:])
	}
	if got := epochEndTable([]Epoch{{1, 1}, {3, 90}}, 1); got != 0 {
		t.Fatalf("epoch 1 followed by epoch 3 in the table: end %d, want 0 (epoch 2's start unknown)", got)
	}
}
