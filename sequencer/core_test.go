package sequencer

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/wire"
)

func TestCore_StartsWithSessionAndEpochStart(t *testing.T) {
	tests := []struct {
		name     string
		firstSeq uint64
		want     []wire.InternalType
	}{
		{"fresh session", 1, []wire.InternalType{wire.InternalSessionStart, wire.InternalEpochStart}},
		{"new epoch", 1000, []wire.InternalType{wire.InternalEpochStart}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.FirstSeq = tt.firstSeq
			cfg.Epoch = 3
			cfg.StartTime = 5000
			c, sink := newCore(t, cfg)
			if err := c.Step(at(6000), frame(t, acctA, 1, 0, cmd(1, "x")), 1); err != nil {
				t.Fatal(err)
			}
			c.Flush(at(6000))
			ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
			if ms[0].Seq != tt.firstSeq {
				t.Fatalf("first seq %d, want %d", ms[0].Seq, tt.firstSeq)
			}
			got := internals(ms[:len(tt.want)])
			if !slices.Equal(got, tt.want) {
				t.Fatalf("first records %v, want %v", got, tt.want)
			}
			for _, m := range ms[:len(tt.want)] {
				if m.Flags != wire.FlagInternal|wire.FlagSeqGen || m.Internal.Epoch != 3 || m.Time != 5000 {
					t.Fatalf("seq %d: flags %b epoch %d time %d", m.Seq, m.Flags, m.Internal.Epoch, m.Time)
				}
			}
			if got := commands(ms); !slices.Equal(got, []string{"x"}) {
				t.Fatalf("commands %q", got)
			}
			if c.NextSeq() != ms[len(ms)-1].Seq+1 {
				t.Fatalf("NextSeq %d after seq %d", c.NextSeq(), ms[len(ms)-1].Seq)
			}
		})
	}
}

// TestCore_Dedupe feeds frames from one sender and checks which commands
// reach the stream, in which order, and what was counted.
func TestCore_Dedupe(t *testing.T) {
	type in struct {
		incarnation uint64
		cmds        []wire.Command
	}
	tests := []struct {
		name      string
		frames    []in
		want      []string
		wantInc   int // InternalIncarnation records
		wantStats Stats
	}{
		{
			name:      "duplicates dropped",
			frames:    []in{{0, []wire.Command{cmd(1, "a"), cmd(2, "b")}}, {0, []wire.Command{cmd(1, "a"), cmd(2, "b"), cmd(3, "c")}}, {0, []wire.Command{cmd(3, "c")}}},
			want:      []string{"a", "b", "c"},
			wantStats: Stats{Commands: 3, Duplicates: 3},
		},
		{
			name:      "out of order dropped then accepted after the gap is filled",
			frames:    []in{{0, []wire.Command{cmd(1, "a")}}, {0, []wire.Command{cmd(3, "c")}}, {0, []wire.Command{cmd(2, "b"), cmd(3, "c")}}},
			want:      []string{"a", "b", "c"},
			wantStats: Stats{Commands: 3, OutOfOrder: 1},
		},
		{
			name: "larger incarnation resets cmdSeq",
			frames: []in{
				{1, []wire.Command{cmd(1, "a"), cmd(2, "b")}},
				{2, []wire.Command{cmd(1, "a2"), cmd(2, "b2")}},
				{2, []wire.Command{cmd(2, "b2"), cmd(3, "c2")}},
			},
			want:      []string{"a", "b", "a2", "b2", "c2"},
			wantInc:   2,
			wantStats: Stats{Commands: 5, Duplicates: 1},
		},
		{
			name: "reset frame must start at cmdSeq 1",
			frames: []in{
				{0, []wire.Command{cmd(1, "a"), cmd(2, "b"), cmd(3, "c")}},
				{1, []wire.Command{cmd(4, "d")}},
				{1, []wire.Command{cmd(1, "a1")}},
			},
			want:      []string{"a", "b", "c", "a1"},
			wantInc:   1,
			wantStats: Stats{Commands: 4, OutOfOrder: 1},
		},
		{
			name: "stale incarnation dropped",
			frames: []in{
				{5, []wire.Command{cmd(1, "a")}},
				{4, []wire.Command{cmd(2, "old")}},
				{5, []wire.Command{cmd(2, "b")}},
			},
			want:      []string{"a", "b"},
			wantInc:   1,
			wantStats: Stats{Commands: 2, StaleFrames: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			c, sink := newCore(t, cfg)
			for i, f := range tt.frames {
				if err := c.Step(at(int64(i+1)*1000), frame(t, acctA, 1, f.incarnation, f.cmds...), 1); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			c.Flush(at(0))
			ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
			if got := commands(ms); !slices.Equal(got, tt.want) {
				t.Fatalf("stream %q, want %q", got, tt.want)
			}
			incs := 0
			for _, m := range ms {
				if m.Internal != nil && m.Internal.Type == wire.InternalIncarnation {
					incs++
					if m.Internal.Account != acctA || m.Internal.Instance != 1 {
						t.Fatalf("incarnation record for %v/%d", m.Internal.Account, m.Internal.Instance)
					}
				}
				if m.Internal == nil && (m.Account != acctA || m.Instance != 1) {
					t.Fatalf("command record from %v/%d", m.Account, m.Instance)
				}
			}
			if incs != tt.wantInc {
				t.Fatalf("%d incarnation records, want %d", incs, tt.wantInc)
			}
			s := c.Stats()
			got := Stats{Commands: s.Commands, Duplicates: s.Duplicates, OutOfOrder: s.OutOfOrder, StaleFrames: s.StaleFrames}
			if got != tt.wantStats {
				t.Fatalf("stats %+v, want %+v", got, tt.wantStats)
			}
		})
	}
}

// TestCore_IncarnationBeforeCommands checks that the incarnation record
// precedes the reset frame's first command and carries the incarnation.
func TestCore_IncarnationBeforeCommands(t *testing.T) {
	c, sink := newCore(t, testConfig())
	mustStep(t, c, 1, frame(t, acctA, 2, 9, cmd(1, "x")))
	c.Flush(at(1))
	ms := decodeStream(t, sink.published, 1472)
	// session, epoch, activated, incarnation, x
	if len(ms) != 5 {
		t.Fatalf("%d messages, want 5", len(ms))
	}
	inc := ms[3]
	if inc.Internal == nil || inc.Internal.Type != wire.InternalIncarnation || inc.Internal.Value != 9 || inc.Internal.Instance != 2 {
		t.Fatalf("seq 4 is %+v, want incarnation 9 of instance 2", inc.Internal)
	}
	if string(ms[4].Payload) != "x" || ms[4].CmdSeq != 1 {
		t.Fatalf("seq 5 is %q cmdSeq %d", ms[4].Payload, ms[4].CmdSeq)
	}
}

func mustStep(t testing.TB, c SinkShell, now int64, f []byte) {
	t.Helper()
	if err := c.Step(at(now), f, 1); err != nil {
		t.Fatalf("Step: %v", err)
	}
}

// TestCore_TimeNeverDecreases: sequencer time starts at the larger of
// StartTime and the wall clock, follows the wall forward, and when the wall
// steps back keeps advancing from where it was at the monotonic rate.
func TestCore_TimeNeverDecreases(t *testing.T) {
	cfg := testConfig()
	cfg.StartTime = 1000
	c, sink := newCore(t, cfg)
	readings := []struct {
		now  Time
		want int64
	}{
		{Time{Mono: 500, Wall: 500}, 1000},     // the floor; anchored there
		{Time{Mono: 2000, Wall: 2000}, 2500},   // 1000 + 1500 of mono: ahead of the wall
		{Time{Mono: 2100, Wall: 1500}, 2600},   // the wall steps back: mono goes on
		{Time{Mono: 2100, Wall: 1500}, 2600},   // no time passed
		{Time{Mono: 3000, Wall: 9000}, 9000},   // the wall steps forward: so do stamps
		{Time{Mono: 3100, Wall: 0}, 9100},      // far back
		{Time{Mono: 3000, Wall: 2999}, 9100},   // mono going back counts as no time
		{Time{Mono: 4000, Wall: 10000}, 10000}, // the wall caught up: it leads again
	}
	for i, r := range readings {
		if err := c.Step(r.now, frame(t, acctA, 1, 0, cmd(uint64(i+1), "m")), 1); err != nil {
			t.Fatal(err)
		}
		c.Flush(r.now)
	}
	ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	var times, want []int64
	for _, m := range ms {
		if m.Internal == nil {
			times = append(times, m.Time)
		}
	}
	for _, r := range readings {
		want = append(want, r.want)
	}
	if !slices.Equal(times, want) {
		t.Fatalf("record times %v, want %v", times, want)
	}
	if c.LastTime() != 10000 {
		t.Fatalf("LastTime %d, want 10000", c.LastTime())
	}
}

func TestCore_TimeDeltaOverflowStartsNewPacket(t *testing.T) {
	c, sink := newCore(t, testConfig())
	mustStep(t, c, 10, frame(t, acctA, 1, 0, cmd(1, "a")))
	mustStep(t, c, 10+1<<32, frame(t, acctA, 1, 0, cmd(2, "b")))
	c.Flush(at(0))
	if len(sink.published) != 2 {
		t.Fatalf("%d packets, want 2 (delta would overflow u32)", len(sink.published))
	}
	ms := decodeStream(t, sink.published, 1472)
	if got := ms[len(ms)-1].Time; got != 10+1<<32 {
		t.Fatalf("last time %d", got)
	}
}

func TestCore_Batching(t *testing.T) {
	for _, maxBytes := range []int{256, 1472, 9000} {
		t.Run("max="+itoa(maxBytes), func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxPacketBytes = maxBytes
			cfg.RingBytes = 4096 * maxBytes
			c, sink := newCore(t, cfg)
			const n = 1000
			var want []string
			seq := uint64(1)
			for f := 0; f < n/10; f++ {
				var cmds []wire.Command
				for i := 0; i < 10; i++ {
					p := strings.Repeat(string(rune('a'+i)), 1+int(seq%60))
					cmds = append(cmds, cmd(seq, p))
					want = append(want, p)
					seq++
				}
				mustStep(t, c, int64(f), frame(t, acctA, 1, 0, cmds...))
			}
			c.Flush(at(n))
			ms := decodeStream(t, sink.published, maxBytes)
			if got := commands(ms); !slices.Equal(got, want) {
				t.Fatalf("stream differs from input (%d vs %d messages)", len(got), len(want))
			}
			// Every packet but the last was published because the next
			// record did not fit: it must be nearly full.
			for i, p := range sink.published[:len(sink.published)-1] {
				if len(p)+wire.RecordHeaderBytes+61 <= maxBytes {
					t.Fatalf("packet %d has %d bytes: flushed while room was left", i, len(p))
				}
			}
			if st := c.Stats(); st.Packets != uint64(len(sink.published)) || st.Commands != n {
				t.Fatalf("stats %+v for %d packets", st, len(sink.published))
			}
		})
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestCore_HeartbeatWhenIdle(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatInterval = 10 * time.Millisecond
	cfg.MaxHeartbeatInterval = 0 // a fixed interval
	c, sink := newCore(t, cfg)
	ms := int64(time.Millisecond)
	mustStep(t, c, 1*ms, frame(t, acctA, 1, 0, cmd(1, "a")))
	c.Flush(at(1 * ms))
	npk := len(sink.published)
	c.Tick(at(5 * ms)) // published 4ms ago: no heartbeat yet
	if len(sink.published) != npk {
		t.Fatalf("heartbeat before HeartbeatInterval")
	}
	c.Tick(at(11 * ms))
	if len(sink.published) != npk+1 {
		t.Fatalf("no heartbeat after HeartbeatInterval idle")
	}
	var p wire.Packet
	if err := wire.DecodePacket(sink.published[npk], &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != wire.KindHeartbeat || p.FirstSeq != c.NextSeq() || p.FirstSeq != 5 || p.Stable != 4 || p.BaseTime != 11*ms {
		t.Fatalf("heartbeat %+v, want next seq 5, stable 4, time %d", p, 11*ms)
	}
	c.Tick(at(15 * ms))
	if len(sink.published) != npk+1 {
		t.Fatalf("second heartbeat within HeartbeatInterval")
	}
	c.Tick(at(21 * ms))
	if len(sink.published) != npk+2 || c.Stats().Heartbeats != 2 {
		t.Fatalf("want a heartbeat every interval; stats %+v", c.Stats())
	}
}

// While the stream stays idle the heartbeats thin out, doubling their
// interval up to MaxHeartbeatInterval; the first after a packet still
// comes one HeartbeatInterval after it (receivers learn the tail as soon
// as before), and a packet starts the cadence again.
func TestCore_IdleHeartbeatsBackOff(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatInterval = 10 * time.Millisecond
	cfg.MaxHeartbeatInterval = 50 * time.Millisecond
	c, sink := newCore(t, cfg)
	ms := int64(time.Millisecond)
	heartbeatsAt := func(from, to int64) []int64 {
		var at_ []int64
		for now := from; now <= to; now += ms {
			n := len(sink.published)
			c.Tick(at(now))
			if len(sink.published) > n {
				var p wire.Packet
				if err := wire.DecodePacket(sink.published[len(sink.published)-1], &p); err != nil {
					t.Fatal(err)
				}
				if p.Kind != wire.KindHeartbeat {
					t.Fatalf("at %d ms: a %v packet, want a heartbeat", now/ms, p.Kind)
				}
				at_ = append(at_, now/ms)
			}
		}
		return at_
	}
	mustStep(t, c, 1*ms, frame(t, acctA, 1, 0, cmd(1, "a")))
	c.Flush(at(1 * ms))
	// 10, 20, 40, then 50 ms apart.
	if got, want := heartbeatsAt(2*ms, 300*ms), []int64{11, 31, 71, 121, 171, 221, 271}; !slices.Equal(got, want) {
		t.Fatalf("idle heartbeats at %v ms, want %v", got, want)
	}
	mustStep(t, c, 301*ms, frame(t, acctA, 1, 0, cmd(2, "b")))
	c.Flush(at(301 * ms))
	if got, want := heartbeatsAt(302*ms, 400*ms), []int64{311, 331, 371}; !slices.Equal(got, want) {
		t.Fatalf("after a packet, heartbeats at %v ms, want %v (the cadence starts again)", got, want)
	}
	if c.Stats().Heartbeats != 10 {
		t.Fatalf("%d heartbeats, want 10", c.Stats().Heartbeats)
	}
}

func TestCore_TickFlushesOldOpenPacket(t *testing.T) {
	cfg := testConfig()
	cfg.FlushDelay = time.Millisecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, frame(t, acctA, 1, 0, cmd(1, "a")))
	c.Tick(at(int64(time.Millisecond) / 2))
	if len(sink.published) != 0 {
		t.Fatal("Tick published a packet younger than FlushDelay")
	}
	c.Tick(at(int64(time.Millisecond)))
	if got := commands(decodeStream(t, sink.published, 1472)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after FlushDelay: %q", got)
	}
}

func TestCore_StableNotStandalone(t *testing.T) {
	cfg := testConfig()
	cfg.Standalone = false
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, frame(t, acctA, 1, 0, cmd(1, "a"), cmd(2, "b")))
	c.Flush(at(0))
	var p wire.Packet
	if err := wire.DecodePacket(sink.published[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.Stable != 0 {
		t.Fatalf("stable %d before any SetStable", p.Stable)
	}
	c.SetStable(100) // beyond what was published: clamped
	if c.Stable() != c.Published() || c.Published() != 5 {
		t.Fatalf("stable %d published %d", c.Stable(), c.Published())
	}
	c.Tick(at(1)) // stable moved: a heartbeat carries it at once
	last := sink.published[len(sink.published)-1]
	if err := wire.DecodePacket(last, &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != wire.KindHeartbeat || p.Stable != 5 {
		t.Fatalf("after SetStable: %+v", p)
	}
	c.SetStable(3) // never moves back
	if c.Stable() != 5 {
		t.Fatalf("stable moved back to %d", c.Stable())
	}
}

func TestCore_Emit(t *testing.T) {
	c, sink := newCore(t, testConfig())
	seq := c.Emit(at(42), &wire.Internal{Type: wire.InternalForcePassive, Account: acctB, Instance: 3})
	c.Flush(at(42))
	ms := decodeStream(t, sink.published, 1472)
	last := ms[len(ms)-1]
	if seq != 3 || last.Seq != 3 || last.Internal.Type != wire.InternalForcePassive || last.Flags != wire.FlagInternal|wire.FlagSeqGen || last.Time != 42 {
		t.Fatalf("emitted seq %d: %+v %+v", seq, last, last.Internal)
	}
}

// TestCore_EmitRefusesWhatStateCannotApply: an activation of a new sender
// while the table is full, or an unknown type, would make State.Apply
// fail (and the core panic); Emit refuses it instead.
func TestCore_EmitRefusesWhatStateCannotApply(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSenders = 1
	c, _ := newCore(t, cfg)
	mustStep(t, c, 1, frame(t, acctA, 1, 0, cmd(1, "a")))
	next := c.NextSeq()
	for _, m := range []wire.Internal{
		{Type: wire.InternalNodeActivated, Account: acctB, Instance: 1},
		{Type: wire.InternalActivate + 1},
	} {
		if seq := c.Emit(at(2), &m); seq != 0 || c.NextSeq() != next {
			t.Fatalf("emitted %v as seq %d", m.Type, seq)
		}
	}
	if seq := c.Emit(at(2), &wire.Internal{Type: wire.InternalNodeActivated, Account: acctA, Instance: 1}); seq != next {
		t.Fatalf("activation of a known sender: seq %d, want %d", seq, next)
	}
}

func TestCore_WrongSessionIgnored(t *testing.T) {
	c, sink := newCore(t, testConfig())
	var w wire.CommandWriter
	buf := make([]byte, 256)
	_ = w.Reset(buf, acctA, 1, 0, testSession+1)
	c1 := cmd(1, "a")
	_ = w.Append(&c1)
	if err := c.Step(at(0), w.Bytes(), 1); err != nil {
		t.Fatal(err)
	}
	c.Flush(at(0))
	if got := commands(decodeStream(t, sink.published, 1472)); len(got) != 0 || c.Stats().WrongSession != 1 {
		t.Fatalf("frame of another session sequenced: %q, stats %+v", got, c.Stats())
	}
}

func TestCore_MalformedFrames(t *testing.T) {
	good := frame(t, acctA, 1, 0, cmd(1, "hello"))
	nakBuf := make([]byte, wire.NakBytes)
	nak, _ := wire.AppendNak(nakBuf, &wire.Nak{Session: testSession, FromSeq: 1, ToSeq: 1})
	heartbeat, _ := wire.AppendHeartbeat(make([]byte, 64), 1, testSession, 1, 0, 0, 1)
	mod := func(b []byte, f func([]byte)) []byte { b = append([]byte(nil), b...); f(b); return b }
	tests := []struct {
		name  string
		cfg   *Config
		frame []byte
		want  error
	}{
		{"empty", nil, nil, wire.ErrShort},
		{"bad magic", nil, mod(good, func(b []byte) { b[0] = 'X' }), wire.ErrMagic},
		{"bad version", nil, mod(good, func(b []byte) { b[2] = 9 }), wire.ErrVersion},
		{"heartbeat sent to the sequencer", nil, heartbeat, wire.ErrKind},
		{"truncated command", nil, good[:len(good)-1], wire.ErrRecord},
		{"trailing bytes", nil, append(append([]byte(nil), good...), 0), wire.ErrTrailing},
		{"zero cmdSeq", nil, mod(good, func(b []byte) { clear(b[wire.CommandHeaderBytes : wire.CommandHeaderBytes+8]) }), wire.ErrZeroSeq},
		{"truncated nak", nil, nak[:30], wire.ErrShort},
		{"reversed nak", nil, mod(nak, func(b []byte) { b[32] = 0 }), wire.ErrNakRange}, // toSeq
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				cfg = *tt.cfg
			}
			c, sink := newCore(t, cfg)
			next := c.NextSeq()
			err := c.Step(at(100), tt.frame, 1)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Step: %v, want %v", err, tt.want)
			}
			if c.Stats().Malformed != 1 || c.NextSeq() != next || c.LastTime() != 0 {
				t.Fatalf("malformed frame changed state: stats %+v next %d time %d", c.Stats(), c.NextSeq(), c.LastTime())
			}
			// The same sender's valid command still goes through as cmdSeq 1.
			mustStep(t, c, 100, good)
			c.Flush(at(100))
			if got := commands(decodeStream(t, sink.published, cfg.MaxPacketBytes)); !slices.Equal(got, []string{"hello"}) {
				t.Fatalf("after a malformed frame: %q", got)
			}
			if len(sink.sent) != 0 {
				t.Fatalf("replied to a malformed frame")
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"Session", func(c *Config) { c.Session = 0 }},
		{"Epoch", func(c *Config) { c.Epoch = 0 }},
		{"FirstSeq", func(c *Config) { c.FirstSeq = 0 }},
		{"StartTime", func(c *Config) { c.StartTime = -1 }},
		{"MaxPacketBytes", func(c *Config) { c.MaxPacketBytes = 255 }},
		{"MaxPacketBytes", func(c *Config) { c.MaxPacketBytes = 65508 }},
		{"HeartbeatInterval", func(c *Config) { c.HeartbeatInterval = 0 }},
		{"FlushDelay", func(c *Config) { c.FlushDelay = -1 }},
		{"RingBytes", func(c *Config) { c.RingBytes = 2*c.MaxPacketBytes - 1 }},
		{"NakAnswerBytes", func(c *Config) { c.NakAnswerBytes = 0 }},
		{"MaxMessageBytes", func(c *Config) { c.MaxMessageBytes = wire.MaxMessageBytes + 1 }},
		{"MaxSenders", func(c *Config) { c.MaxSenders = 0 }},
		{"ActiveTimeout", func(c *Config) { c.ActiveTimeout = -1 }},
	}
	if err := testConfig().Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	var ce *config.Error
	if err := DefaultConfig().Validate(); !errors.As(err, &ce) || ce.Field != "Session" {
		t.Fatalf("DefaultConfig without a session: %v", err)
	}
	for _, tt := range tests {
		cfg := testConfig()
		tt.mod(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%s: %v", tt.field, err)
		}
		if _, err := NewSinkShell(cfg, &recordingSink{}); !errors.Is(err, ErrConfig) {
			t.Errorf("New accepted a bad %s: %v", tt.field, err)
		}
	}
}
