package node

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// rec is one record a test sequencer publishes.
type rec struct {
	payload []byte
	account wire.Account
	inst    uint8
	cmdSeq  uint64
	flags   uint8
	total   uint32
	offset  uint32
	dt      int64 // time after the packet's base time
}

// stream plays the sequencer: it builds stream packets by hand.
type stream struct {
	t     testing.TB
	epoch uint32
	// epochStart is the first seq of epoch, carried by every header.
	epochStart uint64
	session    uint64
	buf        []byte
	w          wire.PacketWriter
}

func newStream(t testing.TB) *stream {
	return &stream{t: t, epoch: 1, epochStart: 1, session: 77, buf: make([]byte, 1<<17)}
}

// packet encodes records numbered from first, stamped with stable and base
// time; the frame returned is a fresh copy.
func (s *stream) packet(first, stable uint64, base int64, recs ...rec) []byte {
	s.t.Helper()
	if err := s.w.Reset(s.buf, wire.KindData, s.epoch, s.session, first, base, s.epochStart); err != nil {
		s.t.Fatal(err)
	}
	for i := range recs {
		r := &recs[i]
		wr := wire.Record{Time: base + r.dt, Account: r.account, Instance: r.inst, Flags: r.flags,
			CmdSeq: r.cmdSeq, Total: r.total, Offset: r.offset, Payload: r.payload}
		if err := s.w.Append(&wr); err != nil {
			s.t.Fatal(err)
		}
	}
	wire.SetStable(s.buf, stable)
	return bytes.Clone(s.w.Bytes())
}

// msgs builds a packet of n app messages with payload "m<seq>", stable =
// last seq (a standalone sequencer) and time = seq*1000.
func (s *stream) msgs(first uint64, n int) []byte {
	s.t.Helper()
	recs := make([]rec, n)
	for i := range recs {
		q := first + uint64(i)
		recs[i] = rec{payload: payloadOf(q), account: wire.MustAccount("other"), cmdSeq: q, dt: int64(i) * 1000}
	}
	return s.packet(first, first+uint64(n)-1, int64(first)*1000, recs...)
}

func payloadOf(seq uint64) []byte {
	return []byte("m" + string(rune('0'+seq%10)) + string(rune('a'+seq%26)))
}

func (s *stream) heartbeat(next, stable uint64, now int64) []byte {
	s.t.Helper()
	b, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), s.epoch, s.session, next, stable, now, s.epochStart)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

func (s *stream) internal(x wire.Internal) rec {
	b, err := wire.AppendInternal(make([]byte, wire.InternalBytes), &x)
	if err != nil {
		s.t.Fatal(err)
	}
	return rec{payload: b, flags: wire.FlagInternal | wire.FlagSeqGen}
}

func (s *stream) gone(from, oldest uint64) []byte { return s.goneRange(from, from, oldest) }

// goneRange answers a NAK of from..to: the source retains nothing below
// oldest (0: nothing at all).
func (s *stream) goneRange(from, to, oldest uint64) []byte {
	b, err := wire.AppendGone(make([]byte, wire.GoneBytes), &wire.Gone{Epoch: s.epoch, Session: s.session, FromSeq: from, ToSeq: to, Oldest: oldest})
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// delivered is what a test handler saw.
type delivered struct {
	seq     uint64
	time    int64
	payload string
	mine    bool
	rewind  bool
}

type recorder struct {
	core        *Core
	got         []delivered
	activations []string
	timers      []uint64
	scheduled   []int64
	local       []uint64
	rejected    []uint64
	rejectErrs  []error
	onMessage   func(m *Message)
}

func (r *recorder) OnMessage(m *Message) {
	rw := false
	if r.core != nil {
		rw = r.core.Rewinding()
	}
	r.got = append(r.got, delivered{m.Seq, m.Time, string(m.Payload), m.Mine(), rw})
	if r.onMessage != nil {
		r.onMessage(m)
	}
}
func (r *recorder) OnActivated()   { r.activations = append(r.activations, "activated") }
func (r *recorder) OnDeactivated() { r.activations = append(r.activations, "deactivated") }
func (r *recorder) OnTimer(id uint64, scheduled int64) {
	r.timers = append(r.timers, id)
	r.scheduled = append(r.scheduled, scheduled)
}
func (r *recorder) OnLocalTimer(id uint64) { r.local = append(r.local, id) }
func (r *recorder) OnRejected(cmdSeq uint64, err error) {
	r.rejected = append(r.rejected, cmdSeq)
	r.rejectErrs = append(r.rejectErrs, err)
}

func (r *recorder) seqs() []uint64 {
	out := make([]uint64, len(r.got))
	for i, d := range r.got {
		out[i] = d.seq
	}
	return out
}

// outbox collects frames the core sends.
type outbox struct{ frames [][]byte }

func (o *outbox) Send(f []byte) { o.frames = append(o.frames, bytes.Clone(f)) }

func (o *outbox) naks(t testing.TB) []wire.Nak {
	t.Helper()
	var out []wire.Nak
	for _, f := range o.frames {
		if k, _ := wire.PeekKind(f); k != wire.KindNak {
			continue
		}
		var n wire.Nak
		if err := wire.DecodeNak(f, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// sentCommand is one decoded command record.
type sentCommand struct {
	cmdSeq  uint64
	flags   uint8
	total   uint32
	offset  uint32
	payload []byte
}

func (o *outbox) commands(t testing.TB) []sentCommand {
	t.Helper()
	var out []sentCommand
	for _, f := range o.frames {
		if k, _ := wire.PeekKind(f); k != wire.KindCommand {
			continue
		}
		var p wire.CommandPacket
		if err := wire.DecodeCommand(f, &p); err != nil {
			t.Fatal(err)
		}
		var c wire.Command
		for p.Next(&c) {
			out = append(out, sentCommand{c.CmdSeq, c.Flags, c.Total, c.Offset, bytes.Clone(c.Payload)})
		}
	}
	return out
}

func testConfig() Config {
	c := DefaultConfig()
	c.Account = "me"
	c.Incarnation = 5
	c.Seed = 1
	c.PendingRecords = 1 << 10
	c.Window = 16
	c.Rewind = true      // most tests start mid-stream and expect seq 1 first
	c.StatusInterval = 0 // tests of status frames turn it on
	return c
}

func newTestCore(t testing.TB, cfg Config) (*Core, *recorder, *outbox) {
	t.Helper()
	h := &recorder{}
	o := &outbox{}
	c, err := NewCore(cfg, h, o)
	if err != nil {
		t.Fatal(err)
	}
	h.core = c
	return c, h, o
}

func step(t testing.TB, c *Core, now int64, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		// A packet of another session is dropped with a warning
		// (counted in OtherSession), not an error.
		if err := c.Step(now, f); err != nil && !errors.Is(err, ErrOtherSession) {
			t.Fatalf("Step: %v", err)
		}
	}
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}
