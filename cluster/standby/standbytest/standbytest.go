// Package standbytest holds the set-ups of the tests that run a standby
// (package cluster/standby and package cluster): a primary's stream
// recorded packet by packet, later epochs cut from it, the State every
// applier must hold, and a client that keeps what is sent. It imports
// no standby, so the standby's own tests use it too.
package standbytest

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Session is the session of every Stream.
const Session = 9

// Alice is the account that sends every Stream's commands.
var Alice = wire.MustAccount("alice")

// Client is a transport.Client that keeps what is sent.
type Client struct {
	mu   sync.Mutex
	sent [][]byte
	Keep bool // copy sent frames (off for allocation tests)
	N    int  // frames sent
}

// Send counts f, and keeps a copy with Keep.
func (c *Client) Send(f []byte) error {
	c.mu.Lock()
	c.N++
	if c.Keep {
		c.sent = append(c.sent, bytes.Clone(f))
	}
	c.mu.Unlock()
	return nil
}

// Flush, Poll and Close do nothing.
func (c *Client) Flush() error { return nil }
func (c *Client) Poll(transport.Handler, time.Duration) (int, error) {
	return 0, nil
}
func (c *Client) Close() error { return nil }

// Acks returns the standby acks sent so far.
func (c *Client) Acks(t testing.TB) []wire.Status {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wire.Status
	for _, f := range c.sent {
		var st wire.Status
		if k, _ := wire.PeekKind(f); k == wire.KindStatus {
			if err := wire.DecodeStatus(f, &st); err != nil {
				t.Fatal(err)
			}
			if st.Flags&wire.StatusStandby != 0 {
				out = append(out, st)
			}
		}
	}
	return out
}

// Stream is a primary Core whose data packets are kept.
type Stream struct {
	Core   sequencer.SinkShell
	Pkts   [][]byte
	CmdSeq uint64
	Now    int64
}

// Publish keeps a copy of each data packet (sequencer.Sink).
func (s *Stream) Publish(p []byte) {
	if k, _ := wire.PeekKind(p); k == wire.KindData {
		s.Pkts = append(s.Pkts, bytes.Clone(p))
	}
}

// SendTo drops what the Core sends to one peer.
func (s *Stream) SendTo(transport.Peer, []byte) {}

// SeqConfig is the sequencer config of a Stream's epoch that starts at
// seq first.

func SeqConfig(epoch uint32, first uint64) sequencer.Config {
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Epoch, cfg.FirstSeq, cfg.Standalone = Session, epoch, first, false
	cfg.RingBytes = 1 << 20
	cfg.MaxSenders = 64
	return cfg
}

// NewStream is epoch 1's primary from seq 1.
func NewStream(t testing.TB) *Stream {
	t.Helper()
	s := &Stream{}
	c, err := sequencer.NewSinkShell(SeqConfig(1, 1), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Core = c
	return s
}

// NextEpoch is the Stream of a primary of cfg (its epoch, from its
// FirstSeq) that took over st: its clock goes on from s's and its
// commands are numbered on from cmdSeq.
func (s *Stream) NextEpoch(t testing.TB, cfg sequencer.Config, st *sequencer.State, cmdSeq uint64) *Stream {
	t.Helper()
	next := &Stream{Now: s.Now, CmdSeq: cmdSeq}
	c, err := sequencer.NewPrimarySinkShell(cfg, next, sequencer.Takeover{State: st})
	if err != nil {
		t.Fatal(err)
	}
	next.Core = c
	return next
}

// LaterEpochs: epoch 1's 10 commands (pkts), cut 3 packets below their
// end; epoch 2 from the cut, n2 commands numbered on from alice's last
// one before the cut; epoch 3 from epoch 2's end, n3 commands.
func LaterEpochs(t testing.TB, n2, n3 int) (src, e2, e3 *Stream, pkts [][]byte, cut uint64) {
	t.Helper()
	src = NewStream(t)
	pkts = src.Commands(t, 10)
	cut = src.Core.Published() - 3
	e2 = src.NextEpoch(t, SeqConfig(2, cut+1), ReferenceState(t, pkts, cut), LastCmdOf(t, pkts, Alice, cut))
	e2.Commands(t, n2)
	e3 = e2.NextEpoch(t, SeqConfig(3, e2.Core.Published()+1), e2.Core.State(), e2.CmdSeq)
	e3.Commands(t, n3)
	return src, e2, e3, pkts, cut
}

// Commands sequences n commands of alice, one packet each, and returns
// the new packets.
func (s *Stream) Commands(t testing.TB, n int) [][]byte {
	t.Helper()
	before := len(s.Pkts)
	for range n {
		s.CmdSeq++
		s.Now += 1000
		if err := s.Core.Step(sequencer.Time{Mono: s.Now, Wall: s.Now}, CmdFrame(t, s.CmdSeq, "x"), 1); err != nil {
			t.Fatal(err)
		}
		s.Core.Flush(sequencer.Time{Mono: s.Now, Wall: s.Now})
	}
	return s.Pkts[before:]
}

// CmdFrame is a command frame of Alice's: seq, payload.
func CmdFrame(t testing.TB, seq uint64, payload string) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 512), Alice, 1, 0, Session); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Command{CmdSeq: seq, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(w.Bytes())
}

// ReferenceState applies the records of pkts up to seq last to a fresh
// State: what every applier must hold at last.
func ReferenceState(t testing.TB, pkts [][]byte, last uint64) *sequencer.State {
	t.Helper()
	st := sequencer.NewState(64, 1)
	var p wire.Packet
	var r wire.Record
	for _, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Seq == st.LastSeq()+1 && r.Seq <= last {
				if err := st.Apply(&r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if st.LastSeq() != last {
		t.Fatalf("reference state reached %d, want %d", st.LastSeq(), last)
	}
	return st
}

// Batch sequences n commands of alice into one packet.
func (s *Stream) Batch(t testing.TB, n int) []byte {
	t.Helper()
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte("y")
	}
	pkts := s.Frame(t, payloads...)
	if len(pkts) != 1 {
		t.Fatalf("%d packets for one batch", len(pkts))
	}
	return pkts[0]
}

// Frame sequences commands of alice with these payloads, sent in one
// frame, and returns the new packets.
func (s *Stream) Frame(t testing.TB, payloads ...[]byte) [][]byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 2048), Alice, 1, 0, Session); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		s.CmdSeq++
		if err := w.Append(&wire.Command{CmdSeq: s.CmdSeq, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	s.Now += 1000
	before := len(s.Pkts)
	at := sequencer.Time{Mono: s.Now, Wall: s.Now}
	if err := s.Core.Step(at, w.Bytes(), 1); err != nil {
		t.Fatal(err)
	}
	s.Core.Flush(at)
	return s.Pkts[before:]
}

// LastCmdOf is the command seq of acct's last record at or below seq
// last in pkts.
func LastCmdOf(t testing.TB, pkts [][]byte, acct wire.Account, last uint64) uint64 {
	t.Helper()
	var p wire.Packet
	var r wire.Record
	var cmd uint64
	for _, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Seq <= last && r.Account == acct && r.Flags&wire.FlagInternal == 0 {
				cmd = r.CmdSeq
			}
		}
	}
	return cmd
}

// SmallPackets is a sequencer config whose packets hold 256 bytes, so a
// command of a few hundred bytes is sequenced in fragments.
func SmallPackets(epoch uint32, first uint64) sequencer.Config {
	cfg := SeqConfig(epoch, first)
	cfg.MaxPacketBytes = 256
	return cfg
}

// Mixed sequences a small command and a 700-byte one in one frame (the
// big one's first fragment shares the small one's packet) and returns
// the new packets.
func (s *Stream) Mixed(t testing.TB) [][]byte {
	t.Helper()
	return s.Frame(t, bytes.Repeat([]byte{'z'}, 5), bytes.Repeat([]byte{'z'}, 700))
}
