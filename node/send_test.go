package node

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/wire"
)

// ackPacket echoes this node's commands into the stream, as the sequencer
// would, preceded by the incarnation record. Payloads come from what the
// core sent (o), so that they pass its check against another process's.
func ackPacket(s *stream, o *outbox, first uint64, incarnation uint64, cmdSeqs ...uint64) []byte {
	me := wire.MustAccount("me")
	recs := []rec{s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: incarnation})}
	for _, q := range cmdSeqs {
		recs = append(recs, echo(s.t, o, q))
	}
	last := first + uint64(len(recs)) - 1
	return s.packet(first, last, 0, recs...)
}

// echo is the record the sequencer publishes for command q of this node:
// the payload it sent, or the timer record of a timer request.
func echo(t testing.TB, o *outbox, q uint64) rec {
	t.Helper()
	me := wire.MustAccount("me")
	for _, c := range o.commands(t) {
		if c.cmdSeq != q || c.offset != 0 {
			continue
		}
		if c.flags&wire.CmdTimer != 0 {
			var tr wire.TimerRequest
			if err := wire.DecodeTimerRequest(c.payload, &tr); err != nil {
				t.Fatal(err)
			}
			x := wire.Internal{Type: wire.InternalTimerSet, Account: me, ID: tr.ID, Value: uint64(tr.At), Extra: tr.Period}
			if tr.Cancel {
				x = wire.Internal{Type: wire.InternalTimerCancel, Account: me, ID: tr.ID}
			}
			b, err := wire.AppendInternal(make([]byte, wire.InternalBytes), &x)
			if err != nil {
				t.Fatal(err)
			}
			return rec{payload: b, account: me, cmdSeq: q, flags: wire.FlagInternal}
		}
		if c.flags&wire.CmdFragment != 0 {
			t.Fatalf("echo of fragmented command %d: not supported", q)
		}
		return rec{payload: c.payload, account: me, cmdSeq: q}
	}
	t.Fatalf("command %d was never sent", q)
	return rec{}
}

// beatAndTick plays a heartbeat at now (the stream is alive and brings
// nothing new), then ticks: resend timers advance only with the stream.
func beatAndTick(t testing.TB, c *Core, s *stream, now int64) {
	t.Helper()
	step(t, c, now, s.heartbeat(c.r.Tail()+1, c.r.Stable(), now))
	c.Tick(now)
}

func cmdSeqsOf(cs []sentCommand) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.cmdSeq)
	}
	return out
}

func TestCore_SendBatchesIntoOneFrameOnFlush(t *testing.T) {
	c, _, o := newTestCore(t, testConfig())
	for i := 1; i <= 3; i++ {
		q, err := c.Send(0, []byte(strings.Repeat("p", i)))
		if err != nil || q != uint64(i) {
			t.Fatalf("Send %d: cmdSeq %d err %v", i, q, err)
		}
	}
	if len(o.frames) != 0 {
		t.Fatal("frame sent before Flush")
	}
	c.Flush(0)
	if len(o.frames) != 1 {
		t.Fatalf("%d frames, want 1", len(o.frames))
	}
	var p wire.CommandPacket
	if err := wire.DecodeCommand(o.frames[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.Account != wire.MustAccount("me") || p.Incarnation != 5 || p.Count != 3 {
		t.Fatalf("frame header %+v", p)
	}
	cs := o.commands(t)
	if !slices.Equal(cmdSeqsOf(cs), []uint64{1, 2, 3}) || string(cs[2].payload) != "ppp" {
		t.Fatalf("commands %+v", cs)
	}
}

func TestCore_WindowFullAndAckFreesIt(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Window = 4
	c, _, o := newTestCore(t, cfg)
	for i := 0; i < 4; i++ {
		if _, err := c.Send(0, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Send(0, []byte("x")); !errors.Is(err, ErrWindowFull) {
		t.Fatalf("5th Send: %v, want ErrWindowFull", err)
	}
	c.Flush(0)
	step(t, c, 0, ackPacket(s, o, 1, 5, 1, 2))
	if c.InFlight() != 2 {
		t.Fatalf("InFlight() = %d after ack of 2, want 2", c.InFlight())
	}
	if q, err := c.Send(0, []byte("x")); err != nil || q != 5 {
		t.Fatalf("Send after ack: %d %v", q, err)
	}
}

// TestCore_ResendOnlyExpiredCommands: each command has its own resend
// timer; a command sent later is not resent with an older one.
func TestCore_ResendOnlyExpiredCommands(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	c.Send(0, []byte("a"))
	c.Flush(0)
	c.Send(6*ms, []byte("b"))
	c.Send(6*ms, []byte("c"))
	c.Flush(6 * ms)
	ack := ackPacket(s, o, 1, 5, 1, 2, 3)
	o.frames = nil
	beatAndTick(t, c, s, 9*ms)
	if len(o.frames) != 0 {
		t.Fatal("resent before ResendInterval")
	}
	beatAndTick(t, c, s, 11*ms) // ResendInterval, plus 10ns a byte in flight
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{1}) || string(cs[0].payload) != "a" {
		t.Fatalf("resent %v at 11ms, want only 1 (2 and 3 are 5ms old)", cmdSeqsOf(cs))
	}
	// The oldest timed out: the timeout doubled to 20ms for all.
	o.frames = nil
	beatAndTick(t, c, s, 25*ms)
	if len(o.frames) != 0 {
		t.Fatalf("resent %v at 25ms, before the doubled timeout", cmdSeqsOf(o.commands(t)))
	}
	beatAndTick(t, c, s, 27*ms)
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{2, 3}) {
		t.Fatalf("resent %v at 27ms, want 2,3 in order", cmdSeqsOf(cs))
	}
	if r := c.Stats().Resends; r != 3 {
		t.Fatalf("Resends = %d", r)
	}
	step(t, c, 30*ms, ack)
	o.frames = nil
	c.Tick(500 * ms)
	if len(o.frames) != 0 || c.InFlight() != 0 {
		t.Fatalf("after full ack: %d frames, InFlight %d", len(o.frames), c.InFlight())
	}
}

// TestCore_ResendTimeoutFollowsMeasuredRTT: acks that come back in 2ms
// bring the resend timeout from ResendInterval down to the measurement
// (srtt + 4*rttvar, at least MinResendInterval).
func TestCore_ResendTimeoutFollowsMeasuredRTT(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 50 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	me := wire.MustAccount("me")
	now := int64(0)
	seq := uint64(1)
	for q := uint64(1); q <= 20; q++ {
		p := []byte{byte(q)}
		c.Send(now, p)
		c.Flush(now)
		now += 2 * ms
		var recs []rec
		if q == 1 {
			recs = append(recs, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}))
		}
		recs = append(recs, rec{payload: p, account: me, cmdSeq: q})
		step(t, c, now, s.packet(seq, seq+uint64(len(recs))-1, 0, recs...))
		seq += uint64(len(recs))
	}
	if c.Stats().Acked != 20 || c.Stats().Resends != 0 {
		t.Fatalf("stats %+v", c.Stats())
	}
	srtt, rto := c.RTT()
	if srtt != 2*ms || rto >= 3*ms {
		t.Fatalf("srtt %v rto %v after 20 acks in 2ms", time.Duration(srtt), time.Duration(rto))
	}
	c.Send(now, []byte("late"))
	c.Flush(now)
	o.frames = nil
	beatAndTick(t, c, s, now+5*ms)
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{21}) {
		t.Fatalf("resent %v 5ms after the send, want 21 (ResendInterval was 50ms)", cmdSeqsOf(cs))
	}
}

// TestCore_DelayedAcksCauseFewResends: acks that come back after twice
// the initial resend interval cost a few resends while the timeout
// adapts, not a copy of the window every interval.
func TestCore_DelayedAcksCauseFewResends(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Window = 256
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, _ := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	me := wire.MustAccount("me")
	const delay = 20             // ms: 2x ResendInterval
	sentBy := map[int64]uint64{} // ms -> last cmdSeq sent by then
	seq, acked := uint64(1), uint64(0)
	for now := int64(0); now < 2000; now++ {
		// The stream echoes what was sent delay ms ago.
		if last := sentBy[now-delay]; now >= delay && last > acked {
			var recs []rec
			if acked == 0 {
				recs = append(recs, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}))
			}
			for q := acked + 1; q <= last; q++ {
				recs = append(recs, rec{payload: []byte{byte(q)}, account: me, cmdSeq: q})
			}
			step(t, c, now*ms, s.packet(seq, seq+uint64(len(recs))-1, 0, recs...))
			seq += uint64(len(recs))
			acked = last
		} else {
			// The stream is alive (other senders, heartbeats): only
			// this node's acks are late.
			step(t, c, now*ms, s.heartbeat(seq, seq-1, now*ms))
		}
		for i := 0; i < 4; i++ {
			q, err := c.Send(now*ms, []byte{byte(c.nextCmd)})
			if err != nil {
				t.Fatalf("Send at %dms: %v", now, err)
			}
			sentBy[now] = q
		}
		c.Tick(now * ms)
	}
	st := c.Stats()
	t.Logf("sent %d, resent %d", st.CommandsSent, st.Resends)
	if st.Acked < st.CommandsSent-100 || st.Resends > uint64(cfg.Window)/8 {
		t.Fatalf("%d commands sent, %d acked, %d resent: want fewer than %d resends", st.CommandsSent, st.Acked, st.Resends, cfg.Window/8)
	}
}

func TestCore_OldIncarnationDoesNotAck(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	c.Send(0, []byte("x"))
	c.Flush(0)
	step(t, c, 0, ackPacket(s, o, 1, 4, 1)) // a previous life of this node, seen while rewinding
	if c.InFlight() != 1 {
		t.Fatalf("InFlight() = %d: an old incarnation's command acked ours", c.InFlight())
	}
	step(t, c, 0, ackPacket(s, o, 3, 5, 1))
	if c.InFlight() != 0 {
		t.Fatalf("InFlight() = %d after own ack", c.InFlight())
	}
}

func TestCore_ReadOnlySendsNoCommandsButNaks(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ReadOnly = true
	cfg.Account = ""
	cfg.Incarnation = 0
	c, _, o := newTestCore(t, cfg)
	if _, err := c.Send(0, []byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Send: %v", err)
	}
	if err := c.SendTimer(0, 1, 10, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("SendTimer: %v", err)
	}
	step(t, c, 0, s.msgs(1, 1), s.msgs(3, 1))
	c.Tick(int64(time.Second))
	for _, f := range o.frames {
		if k, _ := wire.PeekKind(f); k != wire.KindNak {
			t.Fatalf("read-only node sent a %v frame", k)
		}
	}
	if len(o.naks(t)) != 1 {
		t.Fatalf("read-only node should still NAK: %d frames", len(o.frames))
	}
}

func TestCore_BigCommandIsFragmented(t *testing.T) {
	cfg := testConfig()
	c, _, o := newTestCore(t, cfg)
	c.Send(0, []byte("small"))
	big := make([]byte, 100_000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	q, err := c.Send(0, big)
	if err != nil || q != 2 {
		t.Fatal(q, err)
	}
	c.Flush(0)
	got := make([]byte, len(big))
	n := 0
	for _, f := range o.frames {
		if len(f) > cfg.MaxPacketBytes {
			t.Fatalf("frame of %d bytes > MaxPacketBytes", len(f))
		}
	}
	for _, cmd := range o.commands(t) {
		if cmd.cmdSeq != 2 {
			continue
		}
		if cmd.flags&wire.CmdFragment == 0 || cmd.total != uint32(len(big)) {
			t.Fatalf("fragment %+v", cmd)
		}
		copy(got[cmd.offset:], cmd.payload)
		n += len(cmd.payload)
	}
	if n != len(big) || !bytes.Equal(got, big) {
		t.Fatalf("fragments carry %d bytes; reassembled equal=%v", n, bytes.Equal(got, big))
	}
	if _, err := c.Send(0, make([]byte, cfg.MaxMessageBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized Send: %v", err)
	}
}

func TestCore_SendTimerIsACommandAckedByTimerSet(t *testing.T) {
	s := newStream(t)
	c, h, o := newTestCore(t, testConfig())
	if err := c.SendTimer(0, 42, 1000, 500); err != nil {
		t.Fatal(err)
	}
	if err := c.CancelTimer(0, 43); err != nil {
		t.Fatal(err)
	}
	c.Flush(0)
	cs := o.commands(t)
	var tr wire.TimerRequest
	if len(cs) != 2 || cs[0].flags != wire.CmdTimer || wire.DecodeTimerRequest(cs[0].payload, &tr) != nil ||
		tr != (wire.TimerRequest{ID: 42, At: 1000, Period: 500}) {
		t.Fatalf("timer commands %+v (%+v)", cs, tr)
	}
	me := wire.MustAccount("me")
	set := s.internal(wire.Internal{Type: wire.InternalTimerSet, Account: me, ID: 42, Value: 1000, Extra: 500})
	set.flags, set.account, set.cmdSeq = wire.FlagInternal, me, 1
	inc := s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5})
	fire := s.internal(wire.Internal{Type: wire.InternalTimer, Account: me, ID: 42, Value: 1000})
	step(t, c, 0, s.packet(1, 3, 1000, inc, set, fire))
	if c.InFlight() != 1 {
		t.Fatalf("InFlight() = %d, want 1 (the cancel)", c.InFlight())
	}
	if !slices.Equal(h.timers, []uint64{42}) {
		t.Fatalf("timers fired %v", h.timers)
	}
}

func TestCore_SendFromInsideOnMessage(t *testing.T) {
	s := newStream(t)
	c, h, o := newTestCore(t, testConfig())
	h.onMessage = func(m *Message) {
		if _, err := c.Send(0, m.Payload); err != nil {
			t.Error(err)
		}
	}
	step(t, c, 0, s.msgs(1, 2))
	c.Tick(0)
	if cs := o.commands(t); len(cs) != 2 {
		t.Fatalf("commands sent from OnMessage: %+v", cs)
	}
}

func TestCore_FlushDelayHoldsPartialFrame(t *testing.T) {
	cfg := testConfig()
	cfg.FlushDelay = 2 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	c.Send(10*ms, []byte("x"))
	c.Tick(11 * ms)
	if len(o.frames) != 0 {
		t.Fatal("frame sent before FlushDelay")
	}
	c.Tick(12 * ms)
	if len(o.frames) != 1 {
		t.Fatalf("%d frames after FlushDelay", len(o.frames))
	}
}

func TestConfig_ValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		mut     func(*Config)
		field   string
		allowed string
	}{
		{func(c *Config) { c.Account = "" }, "Account", "empty only with ReadOnly"},
		{func(c *Config) { c.Account = "toolongname" }, "Account", "1..8 printable ASCII bytes"},
		{func(c *Config) { c.Window = 0 }, "Window", "1..1048576"},
		{func(c *Config) { c.NakMaxDelay = 0 }, "NakMaxDelay", ">= NakDelay (1ms)"},
		{func(c *Config) { c.PendingRecords = 1000 }, "PendingRecords", "a power of two in 16..4194304"},
		{func(c *Config) { c.MaxPacketBytes = 10 }, "MaxPacketBytes", "124..1048576"},
	} {
		cfg := testConfig()
		tc.mut(&cfg)
		err := cfg.Validate()
		var ce *config.Error
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Allowed, tc.allowed) {
			t.Errorf("Validate() = %v, want a config.Error on %s allowing %q", err, tc.field, tc.allowed)
		}
	}
	cfg := testConfig()
	cfg.Incarnation = 0
	if _, err := NewCore(cfg, &recorder{}, &outbox{}); err == nil || !strings.Contains(err.Error(), "Incarnation = 0") {
		t.Errorf("NewCore with Incarnation 0: %v", err)
	}
}

// TestCore_WindowBytesBoundsPayloadInFlight: payload bytes in flight are
// bounded, but one command of any size may always go.
func TestCore_WindowBytesBoundsPayloadInFlight(t *testing.T) {
	cfg := testConfig()
	cfg.WindowBytes = 25
	c, _, o := newTestCore(t, cfg)
	ten := bytes.Repeat([]byte("t"), 10)
	for i := 0; i < 2; i++ {
		if _, err := c.Send(0, ten); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if _, err := c.Send(0, ten); !errors.Is(err, ErrWindowFull) {
		t.Fatalf("third 10-byte command with WindowBytes 25: %v, want ErrWindowFull", err)
	}
	if err := c.SendTimer(0, 1, 100, 0); err != nil {
		t.Fatalf("a timer request carries no payload toward WindowBytes: %v", err)
	}
	s := newStream(t)
	c.Flush(0)
	step(t, c, 0, ackPacket(s, o, 1, 5, 1, 2, 3))
	if c.InFlight() != 0 || c.InFlightBytes() != 0 {
		t.Fatalf("after the acks: %d commands, %d bytes in flight", c.InFlight(), c.InFlightBytes())
	}
	if _, err := c.Send(0, bytes.Repeat([]byte("h"), 1000)); err != nil {
		t.Fatalf("one command larger than WindowBytes with nothing in flight: %v", err)
	}
}

// TestCore_ResendBacksOffUntilAnAck: resends that bring no ack come at
// doubling intervals; an ack drops the backoff. The ack of a resent
// command says nothing of the round trip (Karn): the timeout comes from
// the measurement only once a command acked without a resend brings a
// sample.
func TestCore_ResendBacksOffUntilAnAck(t *testing.T) {
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	c, _, o := newTestCore(t, cfg)
	if _, err := c.Send(0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	c.Flush(0)
	s := newStream(t)
	ack1 := ackPacket(s, o, 1, 5, 1)
	hbs := newStream(t) // the heartbeats before the ack: nothing published yet
	var at []time.Duration
	for now := time.Duration(0); now <= 200*time.Millisecond; now += time.Millisecond {
		before := len(o.commands(t))
		step(t, c, int64(now), hbs.heartbeat(1, 0, int64(now)))
		c.Tick(int64(now))
		if len(o.commands(t)) > before {
			at = append(at, now)
		}
	}
	// 10ms, then doubling; each a tick late for the 10ns of the byte in flight.
	want := []time.Duration{11 * time.Millisecond, 32 * time.Millisecond, 73 * time.Millisecond, 154 * time.Millisecond}
	if !slices.Equal(at, want) {
		t.Fatalf("resends at %v, want %v", at, want)
	}
	ms := int64(time.Millisecond)
	step(t, c, 200*ms, ack1)
	if srtt, rto := c.RTT(); rto != 10*ms || srtt != 0 {
		t.Fatalf("srtt %v rto %v after the ack of a resent command, want no sample and the backoff dropped (10ms)", time.Duration(srtt), time.Duration(rto))
	}
	c.Send(200*ms, []byte("y"))
	c.Flush(200 * ms)
	step(t, c, 202*ms, s.packet(3, 3, 0, echo(t, o, 2)))
	if srtt, rto := c.RTT(); srtt != 2*ms || rto != 6*ms {
		t.Fatalf("srtt %v rto %v after a 2ms ack, want 2ms and 6ms", time.Duration(srtt), time.Duration(rto))
	}
	c.Send(202*ms, []byte("z"))
	c.Flush(202 * ms)
	before := len(o.commands(t))
	beatAndTick(t, c, s, 209*ms)
	if len(o.commands(t)) != before+1 {
		t.Fatal("after a fresh sample the next resend did not come after the measured timeout")
	}
}

// TestCore_NoResendWhileBehindTheStream: a node that has not yet read the
// stream up to where its command could appear (a late joiner rewinding
// from seq 1, a gap under repair) cannot have its ack yet: no resend
// until it caught up, then one resend timeout later.
func TestCore_NoResendWhileBehindTheStream(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	step(t, c, 0, s.msgs(100, 1)) // joins at seq 100: 1..99 are repaired first
	c.Send(0, []byte("a"))
	c.Flush(0)
	o.frames = nil
	for now := int64(0); now <= 500*ms; now += ms {
		step(t, c, now, s.heartbeat(101, 100, now)) // the stream is alive
		c.Tick(now)
	}
	if cs := o.commands(t); len(cs) != 0 {
		t.Fatalf("resent %v while 1..99 were being repaired", cmdSeqsOf(cs))
	}
	step(t, c, 500*ms, s.msgs(1, 99)) // caught up to 100; the command is not in the stream
	beatAndTick(t, c, s, 505*ms)
	if cs := o.commands(t); len(cs) != 0 {
		t.Fatal("resent before a resend timeout after catching up")
	}
	beatAndTick(t, c, s, 511*ms)
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{1}) {
		t.Fatalf("resent %v one timeout after catching up, want [1]", cmdSeqsOf(cs))
	}
}

// TestCore_OneRTTSamplePerSendTime: commands sent together and acked in
// one packet are one sample, not hundreds that squeeze rttvar to nothing
// (then any stall longer than srtt resent a whole window).
func TestCore_OneRTTSamplePerSendTime(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Window = 512
	cfg.MinResendInterval = time.Millisecond
	c, _, _ := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	me := wire.MustAccount("me")
	seq := uint64(1)
	for round := int64(0); round < 4; round++ {
		now := round * 100 * ms
		var recs []rec
		if round == 0 {
			recs = append(recs, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}))
		}
		for i := 0; i < 100; i++ {
			q, _ := c.Send(now, []byte{byte(i)})
			recs = append(recs, rec{payload: []byte{byte(i)}, account: me, cmdSeq: q})
		}
		c.Flush(now)
		lat := []int64{4, 12, 4, 12}[round] * ms
		step(t, c, now+lat, s.packet(seq, seq+uint64(len(recs))-1, 0, recs...))
		seq += uint64(len(recs))
	}
	srtt, rto := c.RTT()
	// Samples 4, 12, 4, 12 ms: rttvar stays in milliseconds.
	if rto-srtt < 8*ms {
		t.Fatalf("srtt %v rto %v: rttvar collapsed", time.Duration(srtt), time.Duration(rto))
	}
}

// TestCore_NoResendWhileTheStreamIsSilent: while no packet comes (the
// sequencer stalled, the way back cut), no ack can come and no resend can
// help: timers wait for the stream. The first heartbeat past the timeout
// that still brings no ack sends the command again.
func TestCore_NoResendWhileTheStreamIsSilent(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	step(t, c, 0, s.heartbeat(1, 0, 0))
	c.Send(0, []byte("a"))
	c.Flush(0)
	o.frames = nil
	for now := int64(0); now <= 500*ms; now += ms {
		c.Tick(now)
	}
	if len(o.frames) != 0 {
		t.Fatalf("resent %v while the stream was silent", cmdSeqsOf(o.commands(t)))
	}
	beatAndTick(t, c, s, 501*ms)
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{1}) {
		t.Fatalf("resent %v after a heartbeat without the command, want [1]", cmdSeqsOf(cs))
	}
}

// TestCore_ResendAfterAnEpochCutTheStream: a command sent when the tail
// was at 10 waits for the node to deliver up to 10; a new epoch that cut
// the stream at 5 must not leave it waiting for seqs that will never come
// (the command may have been cut with them).
func TestCore_ResendAfterAnEpochCutTheStream(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	step(t, c, 0, s.packet(1, 5, 0, rec{payload: []byte("a"), account: wire.MustAccount("x"), cmdSeq: 1},
		rec{payload: []byte("b"), account: wire.MustAccount("x"), cmdSeq: 2},
		rec{payload: []byte("c"), account: wire.MustAccount("x"), cmdSeq: 3},
		rec{payload: []byte("d"), account: wire.MustAccount("x"), cmdSeq: 4},
		rec{payload: []byte("e"), account: wire.MustAccount("x"), cmdSeq: 5}))
	step(t, c, 0, s.heartbeat(11, 5, 0)) // 6..10 published, not stable, not held
	c.Send(0, []byte("mine"))
	c.Flush(0)
	o.frames = nil
	s.epoch, s.epochStart = 2, 6 // the failover cut 6..10
	for now := int64(ms); now <= 100*ms; now += ms {
		step(t, c, now, s.heartbeat(6, 5, now))
		c.Tick(now)
	}
	if cs := o.commands(t); len(cs) == 0 || cs[0].cmdSeq != 1 {
		t.Fatalf("resent %v after the cut, want 1", cmdSeqsOf(cs))
	}
}

// TestCore_SendWhileRewindingIsNoRTTSample: a restarted node rewinds from
// seq 1 and sends meanwhile; its command's ack comes only once the node has
// replayed the stream up to it, seconds later. That latency is the replay's,
// not the path's: taken as an RTT sample it set the resend timeout to
// MaxResendInterval, and a command lost after that waited two seconds per
// try (the simulator's seed 1 then never converged: with loss, every later
// command was resent, and Karn's rule allowed no fresh sample to lower it).
func TestCore_SendWhileRewindingIsNoRTTSample(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	step(t, c, 0, s.msgs(100, 1)) // joins live at seq 100: rewinds 1..99
	if !c.Rewinding() {
		t.Fatal("not rewinding")
	}
	c.Send(0, []byte("a"))
	c.Flush(0)
	now := int64(0)
	for ; now < 3000*ms; now += 10 * ms {
		beatAndTick(t, c, s, now) // the replay is slow; the stream is alive
	}
	step(t, c, now, s.msgs(1, 99))                 // caught up
	step(t, c, now+ms, ackPacket(s, o, 101, 5, 1)) // command 1 was sequenced long ago
	if c.InFlight() != 0 || c.Rewinding() {
		t.Fatalf("InFlight %d, Rewinding %v after the replay", c.InFlight(), c.Rewinding())
	}
	if srtt, rto := c.RTT(); srtt > 100*ms || rto > 100*ms {
		t.Fatalf("srtt %v rto %v after a command sent while rewinding", time.Duration(srtt), time.Duration(rto))
	}
	// The next command is lost: it goes again after tens of ms, not seconds.
	now += 2 * ms
	c.Send(now, []byte("b"))
	c.Flush(now)
	o.frames = nil
	for end := now + 100*ms; now < end && len(o.commands(t)) == 0; now += ms {
		beatAndTick(t, c, s, now)
	}
	if cs := o.commands(t); !slices.Equal(cmdSeqsOf(cs), []uint64{2}) {
		t.Fatalf("resent %v within 100ms of the send, want [2]", cmdSeqsOf(cs))
	}
}

// TestCore_ArenaRingKeepsPayloadsAcrossWraps: the payloads of commands in
// flight share one byte ring, freed in cmdSeq order by acks. Across many
// wraps of a small ring (payloads of changing sizes, some skipping the
// ring's end, some too big for what is free) every command in flight
// keeps its own bytes, what is sent carries them, and the ring never
// hands out bytes still in use.
func TestCore_ArenaRingKeepsPayloadsAcrossWraps(t *testing.T) {
	cfg := testConfig()
	cfg.Window = 8
	c, _, o := newTestCore(t, cfg)
	c.arena = make([]byte, 100)
	fill := func(q uint64, n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(q*7 + uint64(i))
		}
		return p
	}
	sent := map[uint64][]byte{}
	inArena := 0
	for q := uint64(1); q <= 400; q++ {
		if c.InFlight() == cfg.Window || q%3 == 0 {
			c.ack(c.acked + uint64(1+q%4))
		}
		p := fill(q, int(q*13%45)+1)
		got, err := c.Send(0, p)
		if err != nil || got != q {
			t.Fatalf("Send %d: %d, %v", q, got, err)
		}
		sent[q] = p
		if c.slot(q).arenaEnd != 0 {
			inArena++
		}
		for r := c.acked + 1; r < c.nextCmd; r++ {
			if s := c.slot(r); !bytes.Equal(s.payload, sent[r]) {
				t.Fatalf("after Send %d: command %d keeps %v, want %v", q, r, s.payload, sent[r])
			}
		}
		if used := c.arenaHead - c.arenaTail; used > uint64(len(c.arena)) {
			t.Fatalf("after Send %d: %d bytes of the arena in use, it has %d", q, used, len(c.arena))
		}
	}
	if inArena < 200 {
		t.Fatalf("only %d of 400 payloads were kept in the arena", inArena)
	}
	c.Flush(0)
	for _, sc := range o.commands(t) {
		if !bytes.Equal(sc.payload, sent[sc.cmdSeq]) {
			t.Fatalf("command %d sent as %v, want %v", sc.cmdSeq, sc.payload, sent[sc.cmdSeq])
		}
	}
}

// TestCore_ArenaKeepsEveryPayloadUnderBurstyAcks: a full window of small
// commands, acked in bursts of changing sizes, for many laps of the arena:
// every payload is kept in the arena (none falls back to its own buffer,
// an allocation per command), as the seqd bench's nodes run.
func TestCore_ArenaKeepsEveryPayloadUnderBurstyAcks(t *testing.T) {
	cfg := testConfig()
	cfg.Window = 4096
	c, _, _ := newTestCore(t, cfg)
	payload := make([]byte, 256)
	for q := uint64(1); q <= 300000; q++ {
		if c.InFlight() == cfg.Window {
			c.ack(c.acked + 1 + q%1500)
		}
		if _, err := c.Send(0, payload); err != nil {
			t.Fatal(err)
		}
		if c.slot(q).arenaEnd == 0 {
			t.Fatalf("command %d (%d in flight, %d B) not kept in the %d B arena", q, c.InFlight(), c.inflightB, len(c.arena))
		}
	}
}

// TestCore_NoResendWhileItsCommandWaitsForStable: behind a sequencer
// group a safe node acks its command only when stable covers it, which
// under load comes after the resend timeout; the command is in the stream
// (the node holds the packet), so no resend can help and none is sent.
// `seqd bench --sequencers 3` resent one command in a hundred so, each a
// duplicate the primary dropped.
func TestCore_NoResendWhileItsCommandWaitsForStable(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, h, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	me := wire.MustAccount("me")
	step(t, c, 0, s.msgs(1, 5))
	q, err := c.Send(0, []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	c.Flush(0)
	// Sequenced at 7, stable still 5: held, not delivered.
	step(t, c, ms, s.packet(6, 5, 0, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}),
		rec{payload: []byte("mine"), account: me, cmdSeq: q}))
	o.frames = nil
	for now := 2 * ms; now <= 200*ms; now += ms {
		step(t, c, now, s.heartbeat(8, 5, now))
		c.Tick(now)
	}
	if cs := o.commands(t); len(cs) != 0 {
		t.Fatalf("resent %v while the command waited in the stream for stable", cmdSeqsOf(cs))
	}
	step(t, c, 201*ms, s.heartbeat(8, 7, 201*ms))
	c.Tick(201 * ms)
	if got := h.seqs(); !slices.Contains(got, 7) {
		t.Fatalf("delivered %v, want 7 once stable", got)
	}
	if c.InFlight() != 0 {
		t.Fatalf("%d commands in flight after the ack", c.InFlight())
	}
	for now := 202 * ms; now <= 300*ms; now += ms {
		beatAndTick(t, c, s, now)
	}
	if cs := o.commands(t); len(cs) != 0 {
		t.Fatalf("resent %v after the ack", cmdSeqsOf(cs))
	}
}

// TestCore_ResendWhenAnEpochCutsItsHeldCommand: the command the node saw
// in the stream, not yet stable, is cut by a failover: the wait ends with
// the epoch, and the command is sent again.
func TestCore_ResendWhenAnEpochCutsItsHeldCommand(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.ResendInterval = 10 * time.Millisecond
	c, _, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	me := wire.MustAccount("me")
	step(t, c, 0, s.msgs(1, 5))
	q, _ := c.Send(0, []byte("mine"))
	c.Flush(0)
	step(t, c, ms, s.packet(6, 5, 0, s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5}),
		rec{payload: []byte("mine"), account: me, cmdSeq: q}))
	o.frames = nil
	s.epoch, s.epochStart = 2, 6 // the failover cut 6..7
	for now := 2 * ms; now <= 100*ms; now += ms {
		step(t, c, now, s.heartbeat(6, 5, now))
		c.Tick(now)
	}
	if cs := o.commands(t); len(cs) == 0 || cs[0].cmdSeq != q {
		t.Fatalf("resent %v after the cut, want %d", cmdSeqsOf(cs), q)
	}
}
