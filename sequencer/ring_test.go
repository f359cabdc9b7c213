package sequencer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func nakFrame(t testing.TB, session, from, to uint64, fromOffset uint32) []byte {
	t.Helper()
	b, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 1, Session: session, FromSeq: from, ToSeq: to, FromOffset: fromOffset})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantRetransmit is the oracle: the published data packets overlapping
// [from, to], minus fragments of from ending at or before fromOffset, at
// most limit bytes of them (and at least one), among the last retained
// published.
func wantRetransmit(t testing.TB, published [][]byte, retained int, from, to uint64, fromOffset uint32, limit int) [][]byte {
	t.Helper()
	var data [][]byte
	for _, b := range published {
		var p wire.Packet
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind == wire.KindData {
			data = append(data, b)
		}
	}
	if len(data) > retained {
		data = data[len(data)-retained:]
	}
	var out [][]byte
	bytes := 0
	for _, b := range data {
		var p wire.Packet
		_ = wire.DecodePacket(b, &p)
		if p.LastSeq() < from || p.FirstSeq > to {
			continue
		}
		var r wire.Record
		p.Next(&r)
		if p.Count == 1 && r.Seq == from && r.Fragment() && r.Offset+uint32(len(r.Payload)) <= fromOffset {
			continue
		}
		if len(out) == 0 || bytes+len(b) <= limit {
			out = append(out, b)
			bytes += len(b)
		} else {
			break
		}
	}
	return out
}

// sameExceptStable compares a retransmitted packet with its original.
func checkRetransmits(t testing.TB, sent []sentPacket, want [][]byte, peer transport.Peer, stable uint64) {
	t.Helper()
	if len(sent) != len(want) {
		t.Fatalf("retransmitted %d packets, want %d", len(sent), len(want))
	}
	for i, s := range sent {
		var p wire.Packet
		if err := wire.DecodePacket(s.pkt, &p); err != nil {
			t.Fatalf("retransmit %d: %v", i, err)
		}
		if s.to != peer || p.Flags != wire.PacketRetransmit || p.Stable != stable {
			t.Fatalf("retransmit %d: to %d flags %d stable %d, want to %d flags %d stable %d", i, s.to, p.Flags, p.Stable, peer, wire.PacketRetransmit, stable)
		}
		// Apart from stable and flags it is the original.
		a, b := bytes.Clone(s.pkt), want[i]
		wire.SetStable(a, 0)
		wire.SetPacketFlags(a, 0)
		b = bytes.Clone(b)
		wire.SetStable(b, 0)
		if !bytes.Equal(a, b) {
			var q wire.Packet
			_ = wire.DecodePacket(b, &q)
			t.Fatalf("retransmit %d is packet first seq %d, want first seq %d", i, p.FirstSeq, q.FirstSeq)
		}
	}
}

func TestCore_NakRetransmits(t *testing.T) {
	type nak struct {
		from, to   uint64
		fromOffset uint32
		session    uint64
		fromOldest bool // from is the oldest seq the ring holds
	}
	tests := []struct {
		name     string
		ring     int  // bytes
		limit    int  // NakAnswerBytes
		commands int  // 100-byte commands: one per 168-byte packet
		big      bool // a 2000-byte command (fragmented) after the first 5
		nak      nak
		gone     bool // want a Gone naming the oldest seq held instead of packets
		ignored  bool
	}{
		{name: "one seq", ring: 64 * 256, limit: 16 * 256, commands: 20, nak: nak{from: 10, to: 10}},
		{name: "range", ring: 64 * 256, limit: 16 * 256, commands: 20, nak: nak{from: 4, to: 12}},
		{name: "range past the tail is clipped", ring: 64 * 256, limit: 16 * 256, commands: 20, nak: nak{from: 20, to: 1000}},
		{name: "answer limited to 3 packets", ring: 64 * 256, limit: 3 * 168, commands: 20, nak: nak{from: 5, to: 20}},
		{name: "answer below one packet sends one", ring: 64 * 256, limit: 1, commands: 20, nak: nak{from: 5, to: 20}},
		{name: "fragmented message", ring: 64 * 256, limit: 16 * 256, commands: 10, big: true, nak: nak{from: 9, to: 10}},
		{name: "fragments already held are skipped", ring: 64 * 256, limit: 16 * 256, commands: 10, big: true, nak: nak{from: 9, to: 10, fromOffset: 700}},
		{name: "gone after the ring wrapped", ring: 8 * 256, limit: 8 * 256, commands: 20, nak: nak{from: 3, to: 10}, gone: true},
		{name: "oldest still held", ring: 8 * 256, limit: 8 * 256, commands: 20, nak: nak{fromOldest: true, to: 30}},
		{name: "beyond the tail", ring: 64 * 256, limit: 16 * 256, commands: 5, nak: nak{from: 9, to: 9}, ignored: true},
		{name: "another session", ring: 64 * 256, limit: 16 * 256, commands: 5, nak: nak{from: 2, to: 3, session: 99}, ignored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxPacketBytes = 256
			cfg.RingBytes = tt.ring
			cfg.NakAnswerBytes = tt.limit
			c, sink := newCore(t, cfg)
			c.Flush(at(0)) // session start, epoch start: seqs 1, 2
			for i := 1; i <= tt.commands; i++ {
				p := strings.Repeat(string(rune('a'+i%26)), 100)
				if tt.big && i == 6 {
					p = strings.Repeat("B", 2000)
				}
				mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), p)))
			}
			c.Flush(at(100))
			session := uint64(testSession)
			if tt.nak.session != 0 {
				session = tt.nak.session
			}
			const peer = transport.Peer(42)
			before := c.Stats()
			if tt.nak.fromOldest {
				o, _ := c.ring.Oldest()
				tt.nak.from = o.FirstSeq
			}
			if err := c.Step(at(200), nakFrame(t, session, tt.nak.from, tt.nak.to, tt.nak.fromOffset), peer); err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			switch {
			case tt.ignored:
				if len(sink.sent) != 0 || st.NaksBeyondTail+st.WrongSession != before.NaksBeyondTail+before.WrongSession+1 {
					t.Fatalf("answered an ignorable NAK: %d packets, stats %+v", len(sink.sent), st)
				}
			case tt.gone:
				if len(sink.sent) != 1 {
					t.Fatalf("%d replies, want one Gone", len(sink.sent))
				}
				var g wire.Gone
				if err := wire.DecodeGone(sink.sent[0].pkt, &g); err != nil {
					t.Fatal(err)
				}
				oldest, _ := c.ring.Oldest()
				want := wire.Gone{Epoch: 1, Session: testSession, FromSeq: tt.nak.from, ToSeq: tt.nak.to, Oldest: oldest.FirstSeq}
				if g != want || sink.sent[0].to != peer || st.Gones != 1 {
					t.Fatalf("gone %+v to %d, want %+v", g, sink.sent[0].to, want)
				}
			default:
				if tt.nak.from < func() uint64 { o, _ := c.ring.Oldest(); return o.FirstSeq }() {
					t.Fatal("the seq asked for left the ring: the case is wrong")
				}
				want := wantRetransmit(t, sink.published, int(c.ring.next-c.ring.first), tt.nak.from, tt.nak.to, tt.nak.fromOffset, tt.limit)
				if len(want) == 0 {
					t.Fatal("test expects no packet: the case is wrong")
				}
				checkRetransmits(t, sink.sent, want, peer, c.Stable())
				if st.Retransmitted != uint64(len(want)) || st.Naks != 1 {
					t.Fatalf("stats %+v", st)
				}
			}
		})
	}
}

// TestCore_NakRateLimitResume checks that a receiver NAKing again from
// where the limited answer stopped gets the rest of the range.
func TestCore_NakRateLimitResume(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	cfg.NakAnswerBytes = 4 * 200
	c, sink := newCore(t, cfg)
	for i := 1; i <= 30; i++ {
		mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), strings.Repeat("x", 150))))
	}
	c.Flush(at(100))
	var got []uint64
	from := uint64(1)
	for rounds := 0; from <= c.Published(); rounds++ {
		if rounds > 20 {
			t.Fatal("repair does not converge")
		}
		sink.sent = nil
		mustStep(t, c, 100, nakFrame(t, testSession, from, c.Published(), 0))
		if len(sink.sent) > 4 {
			t.Fatalf("%d packets for one NAK", len(sink.sent))
		}
		for _, s := range sink.sent {
			var p wire.Packet
			_ = wire.DecodePacket(s.pkt, &p)
			var r wire.Record
			for p.Next(&r) {
				if r.Seq >= from {
					got = append(got, r.Seq)
				}
			}
			from = p.LastSeq() + 1
		}
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("repaired seqs %v, want 1..%d", got, c.Published())
		}
	}
	if uint64(len(got)) != c.Published() {
		t.Fatalf("repaired %d seqs, want %d", len(got), c.Published())
	}
}

// TestCore_GoneBeforeFirstSeq: a new epoch's core has nothing of the
// previous epochs.
func TestCore_GoneBeforeFirstSeq(t *testing.T) {
	cfg := testConfig()
	cfg.FirstSeq = 50
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, nakFrame(t, testSession, 10, 20, 0))
	var g wire.Gone
	if len(sink.sent) != 1 || wire.DecodeGone(sink.sent[0].pkt, &g) != nil || g.FromSeq != 10 || g.Oldest != 0 {
		t.Fatalf("replies %d gone %+v", len(sink.sent), g)
	}
	c.Flush(at(0))
	mustStep(t, c, 0, nakFrame(t, testSession, 10, 20, 0))
	if wire.DecodeGone(sink.sent[1].pkt, &g) != nil || g.Oldest != 50 {
		t.Fatalf("gone %+v, want oldest 50", g)
	}
}

// TestCore_NakBandwidthCap: repairs are paced by RetransmitBytesPerSecond;
// a NAK beyond the budget is answered in part, and the budget refills with
// sequencer time.
func TestCore_NakBandwidthCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	cfg.NakAnswerBytes = 64 * 256
	cfg.RetransmitBytesPerSecond = 20 * 256 * 10 // burst (50ms of it) = 10 packets of 256 B
	c, sink := newCore(t, cfg)
	for i := 1; i <= 40; i++ {
		mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), strings.Repeat("y", 150))))
	}
	c.Flush(at(100))
	mustStep(t, c, 1000, nakFrame(t, testSession, 1, c.Published(), 0))
	first := len(sink.sent)
	var bytes int
	for _, s := range sink.sent {
		bytes += len(s.pkt)
	}
	if first == 0 || bytes > 10*256 || c.Stats().Throttled != 1 {
		t.Fatalf("first answer: %d packets, %d bytes, throttled %d; want at most 2560 bytes and one throttle", first, bytes, c.Stats().Throttled)
	}
	// No time passed: nothing more may go out.
	sink.sent = nil
	mustStep(t, c, 1000, nakFrame(t, testSession, 1, c.Published(), 0))
	if len(sink.sent) != 0 {
		t.Fatalf("%d packets sent with an empty budget", len(sink.sent))
	}
	// 100ms later the bucket is full again.
	sink.sent = nil
	mustStep(t, c, 1000+int64(100*time.Millisecond), nakFrame(t, testSession, 1, c.Published(), 0))
	if len(sink.sent) != first {
		t.Fatalf("after a refill: %d packets, want %d", len(sink.sent), first)
	}
}

// TestCore_SharedLossRepairedByMulticast: when a second receiver asks for
// the same seq within MulticastRepairWindow, the answer is published.
func TestCore_SharedLossRepairedByMulticast(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	cfg.MulticastRepairWindow = time.Millisecond
	c, sink := newCore(t, cfg)
	for i := 1; i <= 10; i++ {
		mustStep(t, c, int64(i), frame(t, acctA, 1, 0, cmd(uint64(i), strings.Repeat("z", 150))))
	}
	c.Flush(at(100))
	published := len(sink.published)
	stepFrom(t, c, 1000, nakFrame(t, testSession, 5, 6, 0), 1)
	if len(sink.sent) == 0 || len(sink.published) != published {
		t.Fatalf("first NAK: %d unicast, %d published; want unicast only", len(sink.sent), len(sink.published)-published)
	}
	unicast := len(sink.sent)
	stepFrom(t, c, 1000+int64(500*time.Microsecond), nakFrame(t, testSession, 5, 6, 0), 2)
	if len(sink.sent) != unicast || len(sink.published) == published || c.Stats().RepairsMulticast != 1 {
		t.Fatalf("second receiver: %d more unicast, %d published, stats %+v; want a multicast answer", len(sink.sent)-unicast, len(sink.published)-published, c.Stats())
	}
	var p wire.Packet
	if err := wire.DecodePacket(sink.published[len(sink.published)-1], &p); err != nil || p.Flags&wire.PacketRetransmit == 0 {
		t.Fatalf("published repair: %v flags %x", err, p.Flags)
	}
	// Outside the window, or the same receiver again: unicast.
	stepFrom(t, c, 1000+int64(5*time.Millisecond), nakFrame(t, testSession, 5, 6, 0), 3)
	stepFrom(t, c, 1000+int64(5*time.Millisecond)+1, nakFrame(t, testSession, 5, 6, 0), 3)
	if c.Stats().RepairsMulticast != 1 {
		t.Fatalf("multicast repairs %d, want still 1", c.Stats().RepairsMulticast)
	}
}

func stepFrom(t testing.TB, c SinkShell, now int64, f []byte, from transport.Peer) {
	t.Helper()
	if err := c.Step(at(now), f, from); err != nil {
		t.Fatalf("Step: %v", err)
	}
}

// TestCore_NakForAHoleSendsOnlyTheHole: a NAK narrowed by ToOffset gets the
// fragments of the hole and nothing after it.
func TestCore_NakForAHoleSendsOnlyTheHole(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	c, sink := newCore(t, cfg)
	c.Flush(at(0))
	mustStep(t, c, 1, frame(t, acctA, 1, 0, cmd(1, strings.Repeat("B", 2000))))
	c.Flush(at(100))
	var seq uint64
	var offsets []uint32
	for _, pkt := range sink.published {
		var p wire.Packet
		var r wire.Record
		if wire.DecodePacket(pkt, &p) != nil {
			t.Fatal("published packet does not decode")
		}
		for p.Next(&r) {
			if r.Fragment() && r.Account == acctA {
				seq = r.Seq
				offsets = append(offsets, r.Offset)
			}
		}
	}
	if len(offsets) < 6 {
		t.Fatalf("only %d fragments: the case is wrong", len(offsets))
	}
	from, to := offsets[2], offsets[4] // ask for fragments 2 and 3
	mustStep(t, c, 200, nakFrameHole(t, seq, from, to))
	var got []uint32
	for _, s := range sink.sent {
		var p wire.Packet
		var r wire.Record
		if err := wire.DecodePacket(s.pkt, &p); err != nil || !p.Next(&r) {
			t.Fatalf("retransmit does not decode: %v", err)
		}
		got = append(got, r.Offset)
	}
	if len(got) != 2 || got[0] != offsets[2] || got[1] != offsets[3] {
		t.Fatalf("resent fragments at %v, want %v", got, offsets[2:4])
	}
}

func nakFrameHole(t testing.TB, seq uint64, from, to uint32) []byte {
	t.Helper()
	b, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 1, Session: testSession, FromSeq: seq, ToSeq: seq, FromOffset: from, ToOffset: to})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
