package replayer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func nakFrame(t *testing.T, n wire.Nak) []byte {
	t.Helper()
	b, err := wire.AppendNak(make([]byte, wire.NakBytes), &n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNaks_AnswersWithTheStoredStable: a replayer answers a NAK with the
// packets it holds, flagged as retransmits, with the stable they were
// stored with (never its own: only the primary advances stable), within
// the sequencer's per-NAK cap; it says Gone, in the NAK's epoch, below
// the oldest seq held, and stays silent beyond the newest.
func TestNaks_AnswersWithTheStoredStable(t *testing.T) {
	st := mixed(2000)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	// The store holds the second half: the first was "evicted".
	half := len(st.pkts) / 2
	for !func() bool { i := packetInfo(st.pkts[half]); return !i.Fragment }() {
		half++
	}
	for i, p := range st.pkts[half:] {
		wire.SetStable(p, uint64(i)) // a recognisable stable per packet
	}
	appendAll(t, s, st.pkts[half:])
	oldest := packetInfo(st.pkts[half]).FirstSeq
	last := s.Contiguous()

	sink := &captureSink{}
	var x naks
	rc := sequencer.DefaultConfig().RepairConfig()
	rc.NakAnswerBytes = 4 * 1472
	x.init(rc, sink)

	// Held: the packets as stored (stable untouched), flagged, capped.
	x.step(1, nakFrame(t, wire.Nak{Epoch: 9, Session: testSession, FromSeq: oldest + 10, ToSeq: last}), 5, s)
	want := expected(st.pkts[half:], oldest+10, last)
	if len(sink.sent) == 0 || len(sink.sent) > 4 {
		t.Fatalf("answer of %d packets, want 1..4 (NakAnswerBytes)", len(sink.sent))
	}
	for i, p := range sink.sent {
		var pk wire.Packet
		if err := wire.DecodePacket(p, &pk); err != nil {
			t.Fatal(err)
		}
		if pk.Flags&wire.PacketRetransmit == 0 {
			t.Fatalf("packet %d not flagged as a retransmit", i)
		}
		w := bytes.Clone(want[i])
		wire.SetPacketFlags(w, wire.PacketRetransmit)
		if !bytes.Equal(p, w) {
			t.Fatalf("packet %d is not the stored packet with its stored stable (got stable %d)", i, pk.Stable)
		}
	}

	// Below the oldest: Gone naming it, in the NAK's epoch.
	sink.sent = sink.sent[:0]
	x.step(2, nakFrame(t, wire.Nak{Epoch: 9, Session: testSession, FromSeq: 3, ToSeq: 9}), 5, s)
	var g wire.Gone
	if len(sink.sent) != 1 || wire.DecodeGone(sink.sent[0], &g) != nil || g.Oldest != oldest || g.Epoch != 9 || g.FromSeq != 3 {
		t.Fatalf("NAK below the oldest: sent %d frames, gone %+v; want one Gone{Epoch 9, Oldest %d}", len(sink.sent), g, oldest)
	}

	// Beyond what is held: no answer (the replayer may get it yet).
	sink.sent = sink.sent[:0]
	x.step(3, nakFrame(t, wire.Nak{Epoch: 9, Session: testSession, FromSeq: last + 1, ToSeq: last + 5}), 5, s)
	// Another session: ignored.
	x.step(4, nakFrame(t, wire.Nak{Epoch: 9, Session: testSession + 1, FromSeq: oldest, ToSeq: oldest}), 5, s)
	if len(sink.sent) != 0 {
		t.Fatalf("NAK beyond the store or of another session answered with %d frames", len(sink.sent))
	}
	if st := x.Stats(); st.Naks != 3 || st.NotHeld != 1 || st.WrongSession != 1 || st.Gones != 1 || st.Retransmitted == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestNaks_AllocatesNothing: answering a NAK from the store allocates
// nothing.
func TestNaks_AllocatesNothing(t *testing.T) {
	st := mixed(2000)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	appendAll(t, s, st.pkts)
	var x naks
	x.init(sequencer.DefaultConfig().RepairConfig(), nopSink{})
	frame := nakFrame(t, wire.Nak{Epoch: 1, Session: testSession, FromSeq: 500, ToSeq: 520})
	x.step(1, frame, 5, s)
	if a := testing.AllocsPerRun(200, func() { x.step(2, frame, 5, s) }); a != 0 {
		t.Fatalf("%v allocations per NAK, want 0", a)
	}
}

type nopSink struct{}

func (nopSink) Publish([]byte)                {}
func (nopSink) SendTo(transport.Peer, []byte) {}
