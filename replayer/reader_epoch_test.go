package replayer

import (
	"sync"
	"testing"

	"github.com/seqd/seqd/wire"
)

// checkReaderRecords decodes the packets a Reader served from from and
// checks that the records of the surviving stream come in order, each
// once, whole, with their epoch's payload up to to. A record of epoch 1
// above the cut may ride in a packet that straddles the cut (served
// whole, as Range does): it is dropped here as every receiver drops it
// when the next epoch's start arrives.
func checkReaderRecords(t *testing.T, name string, pkts [][]byte, from, to, cut uint64) {
	t.Helper()
	v := survivor{where: name, cut: cut, next: from}
	var p wire.Packet
	var r wire.Record
	for _, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Epoch == 1 && p.FirstSeq > cut {
			t.Fatalf("%s: served epoch 1's packet at seq %d, above its cut %d", name, p.FirstSeq, cut)
		}
		for p.Next(&r) {
			if r.Seq < v.next || (p.Epoch == 1 && r.Seq > cut) {
				continue
			}
			v.add(t, &r)
		}
	}
	if v.next <= to {
		t.Fatalf("%s: the records end before seq %d, want up to %d", name, v.next, to)
	}
}

// checkReadersFrom reads s with a Reader from each seq of froms up to m
// and checks the records it serves (checkReaderRecords).
func checkReadersFrom(t *testing.T, s *Store, m, cut uint64, froms ...uint64) {
	t.Helper()
	for _, from := range froms {
		r := NewReader(s.Tip(), from, 8<<10)
		got := readAll(t, r, m, s.Tip(), nil)
		r.Close()
		checkReaderRecords(t, "from "+itoa(from), got, from, m, cut)
	}
}

// TestReader_EpochRestart: a store that holds epoch 1 past its cut and
// then epoch 2 from the cut on (Store's epoch restart) is read by a
// Reader as the store serves it: the cut packets skipped, the new epoch's
// served, no Corruption; from any seq, and after a reopen. It failed with
// a Corruption (frame seqs going back) at the restart.
func TestReader_EpochRestart(t *testing.T) {
	const n, cut, m = 2000, 1800, 3000
	st := cutStream(n, cut, m)
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, testConfig())
	appendAll(t, s, st.pkts)
	if err := s.Tick(1 << 40); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		checkReadersFrom(t, s, m, cut, 1, cut-50, cut, cut+1, cut+2, n-3, n, n+1, m)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.ReadOnly = true
	a, _ := mustOpen(t, dir, cfg)
	defer a.Close()
	check(a)
}

// TestReader_EpochRestartWhileFollowing: a Reader following the tip that
// already served the deposed primary's packets above the cut (the store
// took them before the new epoch came) goes on with the new epoch's
// packets from its start, as the live stream did, instead of stopping
// with a Corruption.
func TestReader_EpochRestartWhileFollowing(t *testing.T) {
	const n, cut, m = 1500, 1300, 2500
	st := cutStream(n, cut, m)
	first := firstOfEpoch(t, st.pkts, 2)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts[:first])
	if err := s.Tick(1 << 40); err != nil {
		t.Fatal(err)
	}
	r := NewReader(s.Tip(), cut-100, 8<<10)
	defer r.Close()
	before := readAll(t, r, lastSeq(st.pkts[:first]), s.Tip(), nil)
	var wg sync.WaitGroup
	var after [][]byte
	wg.Add(1)
	go func() {
		defer wg.Done()
		after = readAll(t, r, m, s.Tip(), nil)
	}()
	appendAll(t, s, st.pkts[first:])
	if err := s.Tick(1 << 41); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(after) == 0 || packetEpoch(after[0]) != 2 || packetInfo(after[0]).FirstSeq != cut+1 {
		t.Fatalf("after the restart the reader served %d packets, want epoch 2's from seq %d first", len(after), cut+1)
	}
	var surviving [][]byte
	for _, b := range before {
		if packetEpoch(b) == 1 && packetInfo(b).FirstSeq > cut {
			continue // served live before the cut was known, as the stream did
		}
		surviving = append(surviving, b)
	}
	checkReaderRecords(t, "following", append(surviving, after...), cut-100, m, cut)
}
