package sequencer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

const testSession = 7

// recordingSink keeps a copy of everything the core sends.
type recordingSink struct {
	published [][]byte
	sent      []sentPacket
}

type sentPacket struct {
	to  transport.Peer
	pkt []byte
}

func (s *recordingSink) Publish(pkt []byte) {
	s.published = append(s.published, bytes.Clone(pkt))
}

func (s *recordingSink) SendTo(to transport.Peer, pkt []byte) {
	s.sent = append(s.sent, sentPacket{to, bytes.Clone(pkt)})
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Session = testSession
	cfg.RingBytes = 64 * cfg.MaxPacketBytes
	cfg.NakAnswerBytes = 16 * cfg.MaxPacketBytes
	return cfg
}

func newCore(t testing.TB, cfg Config) (SinkShell, *recordingSink) {
	t.Helper()
	sink := &recordingSink{}
	c, err := NewSinkShell(cfg, sink)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, sink
}

var (
	acctA = wire.MustAccount("alice")
	acctB = wire.MustAccount("bob")
)

// frame builds a command frame from (account, instance, incarnation).
func frame(t testing.TB, a wire.Account, instance uint8, incarnation uint64, cmds ...wire.Command) []byte {
	t.Helper()
	var w wire.CommandWriter
	buf := make([]byte, 1<<17)
	if err := w.Reset(buf, a, instance, incarnation, testSession); err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		if err := w.Append(&cmds[i]); err != nil {
			t.Fatalf("append command %d: %v", i, err)
		}
	}
	return bytes.Clone(w.Bytes())
}

func cmd(seq uint64, payload string) wire.Command {
	return wire.Command{CmdSeq: seq, Payload: []byte(payload)}
}

func timerCmd(t testing.TB, seq uint64, tr wire.TimerRequest) wire.Command {
	t.Helper()
	p, err := wire.AppendTimerRequest(make([]byte, wire.TimerRequestBytes), &tr)
	if err != nil {
		t.Fatal(err)
	}
	return wire.Command{CmdSeq: seq, Flags: wire.CmdTimer, Payload: p}
}

// msg is one reassembled message of the stream.
type msg struct {
	Seq      uint64
	Time     int64
	Flags    uint8 // without FlagFragment
	Account  wire.Account
	Instance uint8
	CmdSeq   uint64
	Payload  []byte
	Internal *wire.Internal // decoded when FlagInternal
}

// decodeStream decodes every published data packet (checking each is
// well-formed, within MaxPacketBytes and contiguous with the previous one),
// reassembles fragments and returns the messages in stream order.
func decodeStream(t testing.TB, pkts [][]byte, maxBytes int) []msg {
	t.Helper()
	var out []msg
	var asm *msg
	var asmHave int
	next := uint64(0)
	for i, b := range pkts {
		if len(b) > maxBytes {
			t.Fatalf("packet %d: %d bytes > MaxPacketBytes %d", i, len(b), maxBytes)
		}
		var p wire.Packet
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if p.Session != testSession {
			t.Fatalf("packet %d: session %d", i, p.Session)
		}
		if p.Kind == wire.KindHeartbeat {
			continue
		}
		var r wire.Record
		for p.Next(&r) {
			if next == 0 {
				next = r.Seq
			}
			if r.Fragment() {
				if asm == nil {
					if r.Seq != next {
						t.Fatalf("packet %d: fragment of seq %d, want seq %d", i, r.Seq, next)
					}
					asm = &msg{Seq: r.Seq, Time: r.Time, Flags: r.Flags &^ wire.FlagFragment, Account: r.Account,
						Instance: r.Instance, CmdSeq: r.CmdSeq, Payload: make([]byte, r.Total)}
					asmHave = 0
				}
				if r.Seq != asm.Seq || int(r.Offset) != asmHave {
					t.Fatalf("packet %d: fragment seq %d offset %d, want seq %d offset %d", i, r.Seq, r.Offset, asm.Seq, asmHave)
				}
				copy(asm.Payload[r.Offset:], r.Payload)
				asmHave += len(r.Payload)
				if asmHave == len(asm.Payload) {
					out = append(out, *asm)
					asm = nil
					next++
				}
				continue
			}
			if r.Seq != next {
				t.Fatalf("packet %d: record seq %d, want %d", i, r.Seq, next)
			}
			m := msg{Seq: r.Seq, Time: r.Time, Flags: r.Flags, Account: r.Account, Instance: r.Instance,
				CmdSeq: r.CmdSeq, Payload: bytes.Clone(r.Payload)}
			if r.Flags&wire.FlagInternal != 0 {
				m.Internal = new(wire.Internal)
				if err := wire.DecodeInternal(r.Payload, m.Internal); err != nil {
					t.Fatalf("seq %d: internal: %v", r.Seq, err)
				}
			}
			out = append(out, m)
			next++
		}
	}
	if asm != nil {
		t.Fatalf("stream ends inside fragmented seq %d (%d of %d bytes)", asm.Seq, asmHave, len(asm.Payload))
	}
	return out
}

// commands returns "cmdSeq:payload" of the application messages (not
// internal) in stream order.
func commands(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Internal == nil {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

// internals returns the internal messages' types in stream order.
func internals(ms []msg) []wire.InternalType {
	var out []wire.InternalType
	for _, m := range ms {
		if m.Internal != nil {
			out = append(out, m.Internal.Type)
		}
	}
	return out
}

// at is a reading of a clock whose wall time equals its monotonic time.
func at(ns int64) Time { return Time{Mono: ns, Wall: ns} }
