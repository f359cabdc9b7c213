package replayer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

type captureSink struct {
	published [][]byte
	sent      [][]byte
}

func (s *captureSink) Publish(pkt []byte) { s.published = append(s.published, bytes.Clone(pkt)) }
func (s *captureSink) SendTo(_ transport.Peer, pkt []byte) {
	s.sent = append(s.sent, bytes.Clone(pkt))
}

// sameButStamps compares two stream packets except the fields a repair
// stamps at send time (stable, packet flags).
func sameButStamps(a, b []byte) bool {
	if len(a) != len(b) || len(a) < wire.PacketHeaderBytes {
		return false
	}
	return bytes.Equal(a[:6], b[:6]) && bytes.Equal(a[8:32], b[8:32]) && bytes.Equal(a[40:], b[40:])
}

// TestStore_AnswersNaksAsTheCoreRing: the sequencer's Core does not take
// an injected RetransmitStore (it always answers from its own ring), so
// this checks the contract the repair policy relies on: a Store fed the
// Core's published packets with Put hands out, for every NAK range, the
// same packets the Core sends in answer from its ring (up to the stamps
// a repair sets), and the same Oldest and Newest.
func TestStore_AnswersNaksAsTheCoreRing(t *testing.T) {
	cfg := sequencer.DefaultConfig()
	cfg.Session = testSession
	cfg.RingBytes = 4096 * cfg.MaxPacketBytes
	cfg.NakAnswerBytes = 4096 * cfg.MaxPacketBytes
	cfg.RetransmitBytesPerSecond = 1 << 40
	cfg.NakSourceBytesPerSecond = 0 // every NAK answered whole
	cfg.MulticastRepairWindow = 0
	sink := &captureSink{}
	c, err := sequencer.NewSinkShell(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, cfg.MaxPacketBytes)
	var w wire.CommandWriter
	cmdSeq := uint64(0)
	for i := 0; i < 600; i++ {
		if err := w.Reset(buf, 7, 1, 1, testSession); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 1+i%4; j++ {
			cmdSeq++
			size := 30 + (i*37+j*101)%300
			if err := w.Append(&wire.Command{CmdSeq: cmdSeq, Payload: payload(cmdSeq, size)}); err != nil {
				t.Fatal(err)
			}
		}
		now := sequencer.Time{Mono: int64(i) * 1000, Wall: int64(i) * 1000}
		if err := c.Step(now, w.Bytes(), 1); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			c.Flush(now)
		}
	}
	c.Flush(sequencer.Time{Mono: 1e9, Wall: 1e9})
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	var store sequencer.RetransmitStore = s
	var data [][]byte
	for _, p := range sink.published {
		if k, _ := wire.PeekKind(p); k == wire.KindData {
			store.Put(p, packetInfo(p))
			data = append(data, p)
		}
	}
	if s.Err() != nil || s.Stats().Appended != uint64(len(data)) {
		t.Fatalf("Put of the Core's packets: %v (%d of %d held)", s.Err(), s.Stats().Appended, len(data))
	}
	last := c.Published()
	if s.Contiguous() != last {
		t.Fatalf("Contiguous = %d, the Core published %d", s.Contiguous(), last)
	}
	oldest, _ := s.Oldest()
	if oldest != packetInfo(data[0]) || oldest.FirstSeq != 1 {
		t.Fatalf("Oldest = %+v", oldest)
	}
	for from := uint64(1); from <= last; from += 13 {
		for _, span := range []uint64{0, 2, 40} {
			to := min(from+span, last)
			sink.sent = sink.sent[:0]
			nak, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 1, Session: testSession, FromSeq: from, ToSeq: to})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Step(sequencer.Time{Mono: 2e9, Wall: 2e9}, nak, 2); err != nil {
				t.Fatal(err)
			}
			got, _ := collect(s, from, to)
			if len(got) == 0 || len(got) != len(sink.sent) {
				t.Fatalf("NAK %d..%d: the Core sent %d packets, the Store holds %d", from, to, len(sink.sent), len(got))
			}
			for i := range got {
				if !sameButStamps(got[i], sink.sent[i]) {
					t.Fatalf("NAK %d..%d: packet %d differs", from, to, i)
				}
			}
		}
	}
}
