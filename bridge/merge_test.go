package bridge

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/seqd/seqd/wire"
)

// spec describes a test packet: count whole records from first, or, with
// total > 0, one fragment [off, off+n) of a message of total bytes at
// first.
type spec struct {
	epoch             uint32
	epochStart, first uint64
	count             int
	off, n, total     uint32
}

func (s spec) String() string {
	s.epoch = max(s.epoch, 1)
	if s.total > 0 {
		return fmt.Sprintf("e%d:%d@%d", s.epoch, s.first, s.off)
	}
	return fmt.Sprintf("e%d:%d+%d", s.epoch, s.first, s.count)
}

func build(t testing.TB, s spec) []byte {
	t.Helper()
	var w wire.PacketWriter
	if s.epoch == 0 {
		s.epoch = 1
	}
	if s.epochStart == 0 {
		s.epochStart = 1
	}
	if err := w.Reset(make([]byte, 2048), wire.KindData, s.epoch, 7, s.first, 1000, s.epochStart); err != nil {
		t.Fatal(err)
	}
	if s.total > 0 {
		r := wire.Record{Time: 1000, Flags: wire.FlagFragment, Total: s.total, Offset: s.off, Payload: make([]byte, s.n)}
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < s.count; i++ {
		r := wire.Record{Time: 1000, Payload: []byte{byte(i)}}
		if err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	return append([]byte(nil), w.Bytes()...)
}

type step struct {
	ch   int
	pkt  spec
	want Verdict
}

// run offers the steps and returns the delivered packets' first seqs
// (and fragment offsets) in order.
func run(t *testing.T, m *Merge, steps []step) []string {
	t.Helper()
	var out []string
	for i, st := range steps {
		pkt := build(t, st.pkt)
		v := m.Offer(st.ch, pkt, int64(i)*1000)
		if v != st.want {
			t.Fatalf("step %d (%v on channel %d): verdict %d, want %d", i, st.pkt, st.ch, v, st.want)
		}
		if v != Deliver {
			continue
		}
		out = append(out, st.pkt.String())
		for {
			b, ok := m.Next()
			if !ok {
				break
			}
			var p wire.Packet
			if err := wire.DecodePacket(b, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, describe(b))
		}
	}
	return out
}

func describe(b []byte) string {
	var p wire.Packet
	var r wire.Record
	_ = wire.DecodePacket(b, &p)
	p.Next(&r)
	if r.Fragment() {
		return fmt.Sprintf("e%d:%d@%d", p.Epoch, p.FirstSeq, r.Offset)
	}
	return fmt.Sprintf("e%d:%d+%d", p.Epoch, p.FirstSeq, p.Count)
}

func TestMerge_FirstArrivalWins(t *testing.T) {
	for _, tc := range []struct {
		name  string
		from  uint64
		steps []step
		want  []string
	}{
		{"in order on one channel", 1, []step{
			{0, spec{first: 1, count: 2}, Deliver},
			{0, spec{first: 3, count: 1}, Deliver},
		}, []string{"e1:1+2", "e1:3+1"}},
		{"the copy on the other channel is dropped", 1, []step{
			{0, spec{first: 1, count: 2}, Deliver},
			{1, spec{first: 1, count: 2}, Duplicate},
			{1, spec{first: 3, count: 2}, Deliver},
			{0, spec{first: 3, count: 2}, Duplicate},
		}, []string{"e1:1+2", "e1:3+2"}},
		{"a hole on one channel filled by the other", 1, []step{
			{0, spec{first: 1, count: 1}, Deliver},
			{0, spec{first: 3, count: 1}, Held},
			{0, spec{first: 4, count: 1}, Held},
			{1, spec{first: 3, count: 1}, Duplicate},
			{1, spec{first: 2, count: 1}, Deliver},
			{1, spec{first: 4, count: 1}, Duplicate},
		}, []string{"e1:1+1", "e1:2+1", "e1:3+1", "e1:4+1"}},
		{"starts at from; earlier packets are copies", 10, []step{
			{0, spec{first: 8, count: 2}, Duplicate},
			{0, spec{first: 11, count: 1}, Held},
			{1, spec{first: 9, count: 2}, Deliver},
		}, []string{"e1:9+2", "e1:11+1"}},
		{"fragments are places of their own", 1, []step{
			{0, spec{first: 1, off: 0, n: 100, total: 300}, Deliver},
			{1, spec{first: 1, off: 200, n: 100, total: 300}, Held},
			{0, spec{first: 1, off: 0, n: 100, total: 300}, Duplicate},
			{0, spec{first: 1, off: 100, n: 100, total: 300}, Deliver},
			{0, spec{first: 1, off: 200, n: 100, total: 300}, Duplicate},
			{0, spec{first: 2, count: 1}, Deliver},
		}, []string{"e1:1@0", "e1:1@100", "e1:1@200", "e1:2+1"}},
		{"an overlapping packet that reaches further is delivered", 1, []step{
			{0, spec{first: 1, count: 3}, Deliver},
			{1, spec{first: 2, count: 4}, Deliver},
			{0, spec{first: 4, count: 2}, Duplicate},
		}, []string{"e1:1+3", "e1:2+4"}},
		{"a newer epoch's start below the next place is delivered", 1, []step{
			{0, spec{first: 1, count: 5}, Deliver},
			{0, spec{epoch: 2, epochStart: 4, first: 4, count: 1}, Deliver},
			{1, spec{epoch: 2, epochStart: 4, first: 4, count: 1}, Duplicate},
			{1, spec{epoch: 2, epochStart: 4, first: 5, count: 1}, Deliver},
		}, []string{"e1:1+5", "e2:4+1", "e2:5+1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMerge(2, tc.from, 1<<20)
			if got := run(t, m, tc.steps); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("delivered %v, want %v", got, tc.want)
			}
			if _, hole := m.HoleSince(); hole {
				t.Fatal("a hole is left")
			}
		})
	}
}

func TestMerge_MalformedAndFull(t *testing.T) {
	m := NewMerge(1, 1, 300)
	hb, err := wire.AppendHeartbeat(make([]byte, 256), 1, 7, 5, 4, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.Offer(0, hb, 0); v != Malformed {
		t.Fatalf("heartbeat: %d", v)
	}
	if v := m.Offer(0, []byte{1, 2, 3}, 0); v != Malformed {
		t.Fatalf("garbage: %d", v)
	}
	if v := m.Offer(0, build(t, spec{first: 5, count: 60}), 0); v != Full {
		t.Fatalf("beyond the hold buffer: %d", v)
	}
	c := m.Channel(0)
	if c.Malformed != 2 || c.Full != 1 || m.NextSeq() != 1 {
		t.Fatalf("stats %+v next %d", c, m.NextSeq())
	}
}

func TestMerge_StatsPerChannel(t *testing.T) {
	m := NewMerge(2, 1, 1<<20)
	for s := uint64(1); s <= 10; s++ {
		a, b := 0, 1
		if s%2 == 0 {
			a, b = 1, 0
		}
		if v := m.Offer(a, build(t, spec{first: s, count: 1}), int64(s)*1000); v != Deliver {
			t.Fatalf("seq %d: %d", s, v)
		}
		if v := m.Offer(b, build(t, spec{first: s, count: 1}), int64(s)*1000+250); v != Duplicate {
			t.Fatalf("seq %d copy: %d", s, v)
		}
	}
	for i := 0; i < 2; i++ {
		c := m.Channel(i)
		if c.Firsts != 5 || c.Dups != 5 || c.LagSamples != 5 || c.LagMaxNs != 250 || c.LastSeq != 10 || c.FirstShare(10) != 0.5 {
			t.Fatalf("channel %d: %+v", i, c)
		}
	}
}

// The forwarding path (Offer of the next packet, a copy, a held one and
// its drain) allocates nothing once warm.
func TestMerge_AllocatesNothing(t *testing.T) {
	m := NewMerge(2, 1, 1<<20)
	pkts := make([][]byte, 64)
	for i := range pkts {
		pkts[i] = build(t, spec{first: uint64(i)*4 + 1, count: 4})
	}
	i := 0
	round := func() {
		// Rebase each packet's first seq on the merge's position so that
		// rounds continue the stream.
		a, b := pkts[i%64], pkts[(i+1)%64]
		i += 2
		seq := m.NextSeq()
		setFirst(a, seq)
		setFirst(b, seq+4)
		m.Offer(1, b, 1)
		m.Offer(0, a, 2)
		for {
			if _, ok := m.Next(); !ok {
				break
			}
		}
		m.Offer(1, a, 3)
	}
	for range 200 {
		round()
	}
	if n := testing.AllocsPerRun(500, round); n != 0 {
		t.Fatalf("%v allocations per round", n)
	}
}

func setFirst(pkt []byte, seq uint64) {
	for i := range 8 {
		pkt[24+i] = byte(seq >> (8 * i))
	}
}

func TestMerge_EmptyStoreBeginsOnTheReliableChannel(t *testing.T) {
	m := NewMerge(2, 0, 1<<20)
	m.SetReliable(0)
	got := run(t, m, []step{
		{1, spec{first: 50, count: 1}, Held},
		{1, spec{first: 51, count: 1}, Held},
		{0, spec{first: 40, count: 5}, Deliver},
		{0, spec{first: 45, count: 5}, Deliver},
		{0, spec{first: 50, count: 1}, Duplicate},
		{0, spec{first: 52, count: 1}, Deliver},
	})
	want := []string{"e1:40+5", "e1:45+5", "e1:50+1", "e1:51+1", "e1:52+1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}
