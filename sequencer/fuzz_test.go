package sequencer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// checkingSink fails the test if the core ever sends a frame that does
// not decode.
type checkingSink struct {
	t   *testing.T
	pkt wire.Packet
	g   wire.Gone
	rec wire.Record
	// std, when set, applies every published record (a standby).
	std *State
}

func (s *checkingSink) Publish(pkt []byte) {
	if err := wire.DecodePacket(pkt, &s.pkt); err != nil {
		s.t.Fatalf("published a packet that does not decode: %v", err)
	}
	for s.std != nil && s.pkt.Next(&s.rec) {
		if s.rec.Fragment() && s.rec.Offset != 0 {
			continue
		}
		if err := s.std.Apply(&s.rec); err != nil {
			s.t.Fatalf("standby cannot apply seq %d: %v", s.rec.Seq, err)
		}
	}
}

func (s *checkingSink) SendTo(_ transport.Peer, pkt []byte) {
	if k, _ := wire.PeekKind(pkt); k == wire.KindGone {
		if err := wire.DecodeGone(pkt, &s.g); err != nil {
			s.t.Fatalf("sent a Gone that does not decode: %v", err)
		}
		return
	}
	if err := wire.DecodePacket(pkt, &s.pkt); err != nil || s.pkt.Flags != wire.PacketRetransmit {
		s.t.Fatalf("retransmitted a packet that does not decode (%v) or lacks the flag", err)
	}
}

// FuzzCoreStep feeds two arbitrary frames into a core that already
// sequenced a little traffic; it must never panic and never publish a
// packet that does not decode, and a malformed frame must not assign a
// sequence number.
func FuzzCoreStep(f *testing.F) {
	f.Add(frame(f, acctA, 1, 0, cmd(2, "hello")), nakFrame(f, testSession, 1, 5, 0))
	f.Add(frame(f, acctA, 1, 1, cmd(1, "reset")), frame(f, acctA, 1, 0, cmd(2, "stale")))
	f.Add(frame(f, acctB, 1, 0, wire.Command{CmdSeq: 1, Flags: wire.CmdFragment, Total: 3000, Offset: 0, Payload: make([]byte, 1400)}),
		frame(f, acctB, 1, 0, wire.Command{CmdSeq: 1, Flags: wire.CmdFragment, Total: 3000, Offset: 1400, Payload: make([]byte, 1600)}))
	f.Add(frame(f, acctA, 2, 0, timerCmd(f, 1, wire.TimerRequest{ID: 1, At: 10, Period: 3})), nakFrame(f, testSession, 3, 3, 100))
	f.Add([]byte{0x53, 0x51, 1, 3}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		cfg := testConfig()
		cfg.MaxPacketBytes = 256
		cfg.RingBytes = 8 * cfg.MaxPacketBytes
		cfg.NakAnswerBytes = 4 * cfg.MaxPacketBytes
		cfg.MaxSenders = 4
		cfg.ActiveTimeout = 5
		sink := &checkingSink{t: t, std: NewState(cfg.MaxSenders, cfg.FirstSeq)}
		c, err := NewSinkShell(cfg, sink)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Step(at(1), frame(t, acctA, 1, 0, cmd(1, "seed")), 1); err != nil {
			t.Fatal(err)
		}
		c.Flush(at(1))
		for i, fr := range [][]byte{a, b} {
			next := c.NextSeq()
			if err := c.Step(at(int64(2+i)), fr, 1); err != nil && c.NextSeq() != next {
				t.Fatalf("frame %d rejected (%v) but sequence advanced", i, err)
			}
		}
		c.Tick(at(100))
		c.Flush(at(100))
		c.Tick(at(1000))
		c.Flush(at(1000))
		if !bytes.Equal(c.State().Snapshot(), sink.std.Snapshot()) {
			t.Fatal("the state applied from the published stream differs from the core's")
		}
	})
}

// FuzzStateRestore: Restore never panics on arbitrary bytes, and what it
// accepts encodes back to the same bytes.
func FuzzStateRestore(f *testing.F) {
	c, _ := newCore(f, testConfig())
	mustStep(f, c, 1, frame(f, acctA, 1, 3, cmd(1, "x"), timerCmd(f, 2, wire.TimerRequest{ID: 1, At: 50, Period: 5e6})))
	mustStep(f, c, 1, frame(f, acctB, 2, 0, cmd(1, "y")))
	f.Add(c.State().Snapshot())
	f.Add(NewState(1, 1).Snapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		var s State
		if err := s.Restore(b); err != nil {
			return
		}
		if !bytes.Equal(s.Snapshot(), b) {
			t.Fatal("accepted a snapshot that does not encode back")
		}
	})
}
