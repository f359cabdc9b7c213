package receiver

import (
	"bytes"
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
	dt      int64
}

// stream plays the sequencer: it builds stream frames by hand.
type stream struct {
	t          testing.TB
	epoch      uint32
	epochStart uint64
	session    uint64
	flags      uint16
	buf        []byte
	w          wire.PacketWriter
}

func newStream(t testing.TB) *stream {
	return &stream{t: t, epoch: 1, epochStart: 1, session: 77, buf: make([]byte, 1<<17)}
}

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
	wire.SetPacketFlags(s.buf, s.flags)
	return bytes.Clone(s.w.Bytes())
}

// msgs builds a packet of n messages with payload "m<seq>", stable = last.
func (s *stream) msgs(first uint64, n int) []byte {
	s.t.Helper()
	recs := make([]rec, n)
	for i := range recs {
		q := first + uint64(i)
		recs[i] = rec{payload: []byte{'m', byte('0' + q%10)}, account: wire.MustAccount("other"), cmdSeq: q, dt: int64(i)}
	}
	return s.packet(first, first+uint64(n)-1, int64(first)*1000, recs...)
}

func (s *stream) heartbeat(next, stable uint64, now int64) []byte {
	s.t.Helper()
	b, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), s.epoch, s.session, next, stable, now, s.epochStart)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

func (s *stream) gone(from, to, oldest uint64) []byte {
	b, err := wire.AppendGone(make([]byte, wire.GoneBytes), &wire.Gone{Epoch: s.epoch, Session: s.session, FromSeq: from, ToSeq: to, Oldest: oldest})
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

func testConfig() Config {
	c := DefaultConfig()
	c.Seed = 1
	c.PendingRecords = 1 << 10
	c.StatusInterval = 0
	c.Rewind = true
	return c
}

func newTest(t testing.TB, cfg Config) *Receiver {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sent is one frame of Ready.Send, decoded.
type sent struct {
	to     Source
	kind   wire.Kind
	nak    wire.Nak
	status wire.Status
}

// drive collects and advances the Ready after each input.
type drive struct {
	t         testing.TB
	r         *Receiver
	delivered []Message
	sent      []sent
	persisted int
}

func (d *drive) collect() {
	d.t.Helper()
	d.r.checkInvariants()
	rd := d.r.Ready()
	d.persisted += len(rd.Persist)
	for _, f := range rd.Send {
		x := sent{to: f.To}
		x.kind, _ = wire.PeekKind(f.Bytes)
		switch x.kind {
		case wire.KindNak:
			if err := wire.DecodeNak(f.Bytes, &x.nak); err != nil {
				d.t.Fatal(err)
			}
		case wire.KindStatus:
			if err := wire.DecodeStatus(f.Bytes, &x.status); err != nil {
				d.t.Fatal(err)
			}
		}
		d.sent = append(d.sent, x)
	}
	for _, m := range rd.Deliver {
		m.Payload = bytes.Clone(m.Payload)
		d.delivered = append(d.delivered, m)
	}
	d.r.Advance()
}

func (d *drive) step(now int64, from Source, frames ...[]byte) error {
	d.t.Helper()
	var err error
	for _, f := range frames {
		if err = d.r.Step(now, f, from); err != nil {
			break
		}
	}
	d.collect()
	return err
}

func (d *drive) tick(now int64) {
	d.t.Helper()
	d.r.Tick(now)
	d.collect()
}

func (d *drive) seqs() []uint64 {
	var out []uint64
	for _, m := range d.delivered {
		out = append(out, m.Seq)
	}
	return out
}

func (d *drive) naks() []sent {
	var out []sent
	for _, s := range d.sent {
		if s.kind == wire.KindNak {
			out = append(out, s)
		}
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}
