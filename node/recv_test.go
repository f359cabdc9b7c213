package node

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

func TestCore_InOrderOutOfOrderAndDuplicates(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	p1, p2, p3 := s.msgs(1, 3), s.msgs(4, 3), s.msgs(7, 2)
	// 3 arrives first, 1 twice, 2 last.
	step(t, c, 0, p3, p1, p1, p2, p3)
	if got, want := h.seqs(), seqRange(1, 8); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	for _, d := range h.got {
		if want := string(payloadOf(d.seq)); d.payload != want {
			t.Fatalf("seq %d payload %q, want %q", d.seq, d.payload, want)
		}
	}
	st := c.Stats()
	if st.Duplicates != 3+2 || st.Delivered != 8 {
		t.Fatalf("stats %+v, want 5 duplicates, 8 delivered", st)
	}
	if c.Delivered() != 8 {
		t.Fatalf("Delivered() = %d", c.Delivered())
	}
}

func TestCore_NakAfterDelayWithBackoffAndSuppression(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.NakDelay = 10 * time.Millisecond
	cfg.NakMaxDelay = 40 * time.Millisecond
	c, h, o := newTestCore(t, cfg)
	ms := int64(time.Millisecond)
	step(t, c, 0, s.msgs(1, 2), s.msgs(6, 2)) // 3..5 missing
	if got := h.seqs(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("delivered %v before repair", got)
	}
	c.Tick(4 * ms) // jitter lies in [5ms, 15ms)
	if n := len(o.naks(t)); n != 0 {
		t.Fatalf("%d NAKs before NakDelay/2", n)
	}
	var times []int64
	for now := int64(0); now <= 200*ms; now += ms {
		before := len(o.naks(t))
		c.Tick(now)
		if len(o.naks(t)) > before {
			times = append(times, now)
		}
	}
	naks := o.naks(t)
	want := wire.Nak{Epoch: 1, Session: 77, FromSeq: 3, ToSeq: 5}
	for _, n := range naks {
		if n != want {
			t.Fatalf("NAK %+v, want %+v", n, want)
		}
	}
	if len(times) < 4 {
		t.Fatalf("NAK times %v: want at least 4 in 200ms", times)
	}
	// Backoff: 10, 20, 40, 40 ms between NAKs.
	for i, wantGap := range []int64{10, 20, 40, 40} {
		if i+1 >= len(times) {
			break
		}
		if gap := (times[i+1] - times[i]) / ms; gap != wantGap {
			t.Fatalf("NAK times %v: gap %d is %dms, want %dms", times, i, gap, wantGap)
		}
	}
	// A repair (ours or multicast for another receiver) cancels the NAK.
	step(t, c, 201*ms, s.msgs(3, 3))
	sent := len(o.naks(t))
	for now := 201 * ms; now < 500*ms; now += ms {
		c.Tick(now)
	}
	if len(o.naks(t)) != sent {
		t.Fatalf("NAK sent after the gap was repaired")
	}
	if got := h.seqs(); !slices.Equal(got, seqRange(1, 7)) {
		t.Fatalf("delivered %v", got)
	}
	if g := c.Stats().Gaps; g != 1 {
		t.Fatalf("Gaps = %d, want 1", g)
	}
}

func TestCore_RepairBeforeNakSuppressesIt(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(1, 1), s.msgs(3, 1))
	step(t, c, 100, s.msgs(2, 1)) // someone else's repair, multicast
	for now := int64(0); now < int64(time.Second); now += int64(time.Millisecond) {
		c.Tick(now)
	}
	if n := len(o.naks(t)); n != 0 {
		t.Fatalf("%d NAKs for a gap repaired before the delay", n)
	}
}

func TestCore_TailLossFromHeartbeat(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(1, 3), s.heartbeat(6, 5, 9000)) // 4, 5 lost at the tail
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	if len(naks) != 1 || naks[0].FromSeq != 4 || naks[0].ToSeq != 5 {
		t.Fatalf("NAKs %+v, want one for 4..5", naks)
	}
}

func TestCore_NakNamesLastMissingSeqAndFragmentOffset(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	big := bytes.Repeat([]byte("x"), 300)
	frag := rec{payload: big[:100], flags: wire.FlagFragment, total: 300, account: wire.MustAccount("a")}
	step(t, c, 0, s.msgs(1, 1), s.packet(2, 2, 0, frag), s.msgs(4, 1), s.msgs(6, 1))
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	want := wire.Nak{Epoch: 1, Session: 77, FromSeq: 2, ToSeq: 5, FromOffset: 100}
	if len(naks) != 1 || naks[0] != want {
		t.Fatalf("NAKs %+v, want %+v", naks, want)
	}
}

func TestCore_Reassembly16MiBShuffledWithDuplicates(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	const total = 16 << 20
	msg := make([]byte, total)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range msg {
		msg[i] = byte(rng.Uint32())
	}
	const chunk = 60000
	var frames [][]byte
	for off := 0; off < total; off += chunk {
		end := min(off+chunk, total)
		frames = append(frames, s.packet(2, 3, 1000, rec{payload: msg[off:end], flags: wire.FlagFragment,
			total: total, offset: uint32(off), account: wire.MustAccount("big"), cmdSeq: 9}))
	}
	for i := 0; i < 40; i++ {
		frames = append(frames, frames[rng.IntN(len(frames))])
	}
	rng.Shuffle(len(frames), func(i, j int) { frames[i], frames[j] = frames[j], frames[i] })
	step(t, c, 0, s.msgs(1, 1))
	// Fragments far ahead of the bytes held are dropped (memory grows
	// with bytes that arrived), so, as repairs would, the frames come
	// again until the message is whole.
	rounds := 0
	for ; rounds < 30 && len(h.got) < 2; rounds++ {
		step(t, c, 0, frames...)
	}
	step(t, c, 0, s.msgs(3, 1))
	if got := h.seqs(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("delivered %v after %d rounds", got, rounds)
	}
	if h.got[1].payload != string(msg) {
		t.Fatalf("reassembled message differs (len %d)", len(h.got[1].payload))
	}
	t.Logf("%d rounds, stats %+v", rounds, c.Stats())
}

func TestCore_SafeWaitsForStableFastDoesNot(t *testing.T) {
	for _, mode := range []Mode{Safe, Fast} {
		t.Run(mode.String(), func(t *testing.T) {
			s := newStream(t)
			cfg := testConfig()
			cfg.Mode = mode
			c, h, _ := newTestCore(t, cfg)
			recs := []rec{{payload: []byte("a")}, {payload: []byte("b")}, {payload: []byte("c")}}
			step(t, c, 0, s.packet(1, 1, 0, recs...)) // only seq 1 stable
			want := []uint64{1}
			if mode == Fast {
				want = []uint64{1, 2, 3}
			}
			if got := h.seqs(); !slices.Equal(got, want) {
				t.Fatalf("before stable advanced: delivered %v, want %v", got, want)
			}
			step(t, c, 0, s.heartbeat(4, 3, 10))
			if got := h.seqs(); !slices.Equal(got, []uint64{1, 2, 3}) {
				t.Fatalf("after stable 3: delivered %v", got)
			}
		})
	}
}

func TestCore_EpochFencingDropsOldEpochAndUnstableBuffer(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	step(t, c, 0, s.packet(1, 2, 0, rec{payload: []byte("1")}, rec{payload: []byte("2")}, rec{payload: []byte("old3")}))
	// Epoch 2 starts at 3: the old epoch's unstable seq 3 is cut.
	s.epoch, s.epochStart = 2, 3
	start := s.internal(wire.Internal{Type: wire.InternalEpochStart, Epoch: 2})
	step(t, c, 0, s.packet(3, 4, 0, start, rec{payload: []byte("new4")}))
	// A late packet from the deposed primary is fenced.
	s.epoch, s.epochStart = 1, 1
	step(t, c, 0, s.packet(5, 5, 0, rec{payload: []byte("stale5")}))
	if got := h.seqs(); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("delivered %v", got)
	}
	if h.got[3].payload != "new4" {
		t.Fatalf("seq 4 = %q, want new4", h.got[3].payload)
	}
	st := c.Stats()
	if st.Fenced != 1 || st.DroppedByEpoch != 1 {
		t.Fatalf("stats %+v: want Fenced 1, DroppedByEpoch 1", st)
	}
	if c.Epoch() != 2 {
		t.Fatalf("Epoch() = %d", c.Epoch())
	}
}

func TestCore_FastNodeDivergesWhenNewEpochCutsDelivered(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Mode = Fast
	c, h, _ := newTestCore(t, cfg)
	step(t, c, 0, s.packet(1, 1, 0, rec{payload: []byte("1")}, rec{payload: []byte("2")}, rec{payload: []byte("3")}))
	if len(h.got) != 3 {
		t.Fatalf("fast node delivered %v", h.seqs())
	}
	s.epoch, s.epochStart = 2, 2
	start := s.internal(wire.Internal{Type: wire.InternalEpochStart, Epoch: 2})
	err := c.Step(0, s.packet(2, 2, 0, start))
	if !errors.Is(err, ErrDiverged) || !errors.Is(c.Err(), ErrDiverged) {
		t.Fatalf("Step err %v, Err() %v; want ErrDiverged", err, c.Err())
	}
	want := "receiver: diverged: a new epoch cut messages this receiver already delivered: epoch 2 starts at seq 2 but seqs up to 3 were delivered in epoch 1"
	if c.Err().Error() != want {
		t.Fatalf("Err() = %q\nwant %q", c.Err(), want)
	}
	if err := c.Step(0, s.msgs(4, 1)); err != c.Err() {
		t.Fatalf("Step after fatal error returned %v", err)
	}
}

func TestCore_GoneIsUnrecoverableNamingTheRange(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.PendingRecords = 1 << 13
	c, _, _ := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(1, 119), s.msgs(4001, 1), s.msgs(5000, 1))
	c.Tick(int64(time.Second)) // NAK 120..4000
	err := c.Step(0, s.goneRange(120, 4000, 5000))
	want := "receiver: unrecoverable gap: seqs 120..4000 no longer retained by sequencer (oldest 5000)"
	if !errors.Is(err, ErrUnrecoverable) || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestCore_StaleGoneIsIgnored(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(1, 3))
	if err := c.Step(0, s.gone(1, 2)); err != nil {
		t.Fatalf("Gone with no open gap: %v", err)
	}
	step(t, c, 0, s.msgs(4, 1))
	if len(h.got) != 4 {
		t.Fatalf("delivered %v", h.seqs())
	}
}

func TestCore_RewindLateJoiner(t *testing.T) {
	s := newStream(t)
	c, h, o := newTestCore(t, testConfig())
	if !c.Rewinding() {
		t.Fatal("Rewinding() false before the first packet")
	}
	step(t, c, 0, s.msgs(10, 2)) // live stream is at 10
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	if len(naks) != 1 || naks[0].FromSeq != 1 || naks[0].ToSeq != 9 {
		t.Fatalf("NAKs %+v, want 1..9", naks)
	}
	step(t, c, 0, s.msgs(1, 9))
	if got := h.seqs(); !slices.Equal(got, seqRange(1, 11)) {
		t.Fatalf("delivered %v", got)
	}
	for _, d := range h.got {
		if d.rewind != (d.seq < 10) {
			t.Fatalf("seq %d delivered with Rewinding() = %v", d.seq, d.rewind)
		}
	}
	if c.Rewinding() {
		t.Fatal("still rewinding after catching up")
	}
}

func TestCore_NoRewindStartsLive(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	c, h, o := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(10, 2), s.msgs(5, 2))
	c.Tick(int64(time.Second))
	if got := h.seqs(); !slices.Equal(got, []uint64{10, 11}) || len(o.frames) != 0 || c.Rewinding() {
		t.Fatalf("delivered %v, frames %d, rewinding %v", got, len(o.frames), c.Rewinding())
	}
}

// TestCore_RewindFromSeq: with RewindFrom a late joiner repairs and
// delivers from that seq, not from 1.
func TestCore_RewindFromSeq(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.RewindFrom = 6
	c, h, o := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(10, 2)) // live stream is at 10
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	if len(naks) != 1 || naks[0].FromSeq != 6 || naks[0].ToSeq != 9 {
		t.Fatalf("NAKs %+v, want 6..9", naks)
	}
	step(t, c, 0, s.msgs(1, 9))
	if got := h.seqs(); !slices.Equal(got, seqRange(6, 11)) {
		t.Fatalf("delivered %v, want 6..11", got)
	}
}

func TestCore_NowFollowsStreamTime(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	var seen []int64
	h.onMessage = func(m *Message) { seen = append(seen, c.Now()) }
	step(t, c, 999_999, s.packet(1, 2, 5000, rec{payload: []byte("a")}, rec{payload: []byte("b"), dt: 250}))
	if !slices.Equal(seen, []int64{5000, 5250}) {
		t.Fatalf("Now() during delivery %v, want [5000 5250]", seen)
	}
	step(t, c, 0, s.heartbeat(3, 2, 9000))
	if c.Now() != 9000 {
		t.Fatalf("Now() after idle heartbeat = %d, want 9000", c.Now())
	}
	// A heartbeat announcing undelivered seqs does not move time past them.
	step(t, c, 0, s.heartbeat(5, 4, 12000))
	if c.Now() != 9000 {
		t.Fatalf("Now() = %d with seqs 3..4 missing, want 9000", c.Now())
	}
}

func TestCore_TimersAndActivationForThisInstanceOnly(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	me, other := wire.MustAccount("me"), wire.MustAccount("other")
	step(t, c, 0, s.packet(1, 6, 100,
		s.internal(wire.Internal{Type: wire.InternalNodeActivated, Account: me}),
		s.internal(wire.Internal{Type: wire.InternalNodeActivated, Account: me, Instance: 1}),
		s.internal(wire.Internal{Type: wire.InternalTimer, Account: me, ID: 42, Value: 777}),
		s.internal(wire.Internal{Type: wire.InternalTimer, Account: other, ID: 43, Value: 778}),
		s.internal(wire.Internal{Type: wire.InternalNodeDeactivated, Account: me}),
		rec{payload: []byte("x"), account: me, cmdSeq: 1},
	))
	if !slices.Equal(h.activations, []string{"activated", "deactivated"}) {
		t.Fatalf("activations %v", h.activations)
	}
	if !slices.Equal(h.timers, []uint64{42}) || !slices.Equal(h.scheduled, []int64{777}) {
		t.Fatalf("timers %v at %v, want [42] at [777]", h.timers, h.scheduled)
	}
	if len(h.got) != 6 || h.got[0].mine || !h.got[5].mine {
		t.Fatalf("every message goes to OnMessage, Mine only for own commands: %+v", h.got)
	}
}

func TestCore_LocalTimers(t *testing.T) {
	c, h, _ := newTestCore(t, testConfig())
	c.SetLocalTimer(0, 1, 10*time.Millisecond)
	c.SetLocalTimer(0, 2, 5*time.Millisecond)
	c.SetLocalTimer(0, 1, 20*time.Millisecond) // replaces
	c.Tick(int64(6 * time.Millisecond))
	c.Tick(int64(15 * time.Millisecond))
	if !slices.Equal(h.local, []uint64{2}) {
		t.Fatalf("fired %v by 15ms, want [2]", h.local)
	}
	c.Tick(int64(30 * time.Millisecond))
	if !slices.Equal(h.local, []uint64{2, 1}) {
		t.Fatalf("fired %v, want [2 1]", h.local)
	}
}

func TestCore_MalformedFrameChangesNothing(t *testing.T) {
	s := newStream(t)
	c, h, o := newTestCore(t, testConfig())
	good := s.msgs(1, 2)
	bad := good[:len(good)-1]
	if err := c.Step(0, bad); !errors.Is(err, wire.ErrRecord) {
		t.Fatalf("truncated frame: %v", err)
	}
	if err := c.Step(0, []byte{1, 2}); !errors.Is(err, wire.ErrShort) {
		t.Fatalf("short frame: %v", err)
	}
	nak, _ := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{FromSeq: 1, ToSeq: 1})
	if err := c.Step(0, nak); !errors.Is(err, ErrFrameKind) {
		t.Fatalf("NAK frame: %v", err)
	}
	c.Tick(int64(time.Second))
	if len(h.got) != 0 || len(o.frames) != 0 || c.Stats().Malformed != 3 || c.Session() != 0 {
		t.Fatalf("state changed: got %v frames %d stats %+v", h.got, len(o.frames), c.Stats())
	}
}

func TestCore_LingeringOtherSessionIsCountedNotFollowed(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(1, 1))
	s.session = 76 // a few lingering packets of another session
	step(t, c, 1, s.msgs(2, 1))
	s.session = 77
	step(t, c, 2, s.msgs(2, 1))
	if len(h.got) != 2 || c.Stats().OtherSession != 1 || c.Err() != nil {
		t.Fatalf("delivered %v, stats %+v, err %v", h.seqs(), c.Stats(), c.Err())
	}
}

func TestCore_OverflowBeyondRingIsNakedLater(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.PendingRecords = 16
	c, h, _ := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(2, 30))
	if c.Stats().Overflow == 0 {
		t.Fatal("no overflow counted")
	}
	step(t, c, 0, s.msgs(1, 1), s.msgs(2, 30))
	if got := h.seqs(); !slices.Equal(got, seqRange(1, 31)) {
		t.Fatalf("delivered %v", got)
	}
}

func TestCore_FragmentInProgressIsNotAGapUntilHeartbeat(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	frag := rec{payload: bytes.Repeat([]byte("y"), 100), flags: wire.FlagFragment, total: 300}
	step(t, c, 0, s.msgs(1, 1), s.packet(2, 1, 0, frag))
	c.Tick(int64(time.Second))
	if n := len(o.naks(t)); n != 0 {
		t.Fatalf("%d NAKs for a message still being published", n)
	}
	// The heartbeat says seq 2 was published whole: its tail is lost.
	step(t, c, int64(time.Second), s.heartbeat(3, 2, 0))
	c.Tick(int64(2 * time.Second))
	naks := o.naks(t)
	if len(naks) != 1 || naks[0].FromSeq != 2 || naks[0].ToSeq != 2 || naks[0].FromOffset != 100 {
		t.Fatalf("NAKs %+v, want 2..2 from offset 100", naks)
	}
}

// TestCore_NakAsksOnlyTheHoleOfALargeMessage: with the head and the tail of
// a fragmented message held, the NAK names the hole between them alone.
func TestCore_NakAsksOnlyTheHoleOfALargeMessage(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	big := bytes.Repeat([]byte("x"), 300)
	a := wire.MustAccount("a")
	head := rec{payload: big[:100], flags: wire.FlagFragment, total: 300, account: a}
	tail := rec{payload: big[200:], flags: wire.FlagFragment, total: 300, offset: 200, account: a}
	step(t, c, 0, s.msgs(1, 1), s.packet(2, 1, 0, head), s.packet(2, 2, 0, tail), s.msgs(3, 1))
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	want := wire.Nak{Epoch: 1, Session: 77, FromSeq: 2, ToSeq: 2, FromOffset: 100, ToOffset: 200}
	if len(naks) != 1 || naks[0] != want {
		t.Fatalf("NAKs %+v, want %+v", naks, want)
	}
}

// TestCore_OwnLargeCommandAckedByAStableFragment: the window frees as soon
// as a stable fragment of the node's own command is held, so the command is
// not resent while the rest of its echo is repaired; an unstable fragment
// does not count.
func TestCore_OwnLargeCommandAckedByAStableFragment(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.MaxPacketBytes = 256
	c, _, o := newTestCore(t, cfg)
	payload := bytes.Repeat([]byte("L"), 1000)
	if _, err := c.Send(0, payload); err != nil {
		t.Fatal(err)
	}
	c.Flush(0)
	me := wire.MustAccount("me")
	inc := s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: me, Value: 5})
	step(t, c, 0, s.packet(1, 1, 0, inc))
	frag := rec{payload: payload[:200], flags: wire.FlagFragment, total: 1000, account: me, cmdSeq: 1}
	step(t, c, 0, s.packet(2, 1, 0, frag)) // not stable yet
	if c.InFlight() != 1 {
		t.Fatalf("acked by an unstable fragment: in flight %d", c.InFlight())
	}
	step(t, c, 0, s.heartbeat(3, 2, 0)) // seq 2 is stable now, its other fragments still missing
	if c.InFlight() != 0 {
		t.Fatalf("in flight %d after a stable fragment of my command, want 0", c.InFlight())
	}
	sent := len(o.commands(t))
	c.Tick(int64(time.Second)) // well past ResendInterval
	if got := len(o.commands(t)); got != sent {
		t.Fatalf("the command was resent (%d command records, had %d) though it is in the stream", got, sent)
	}
}

// TestCore_EachHoleOfALargeMessageGetsAFreshNakDelay: once a hole is
// filled, the next hole of the same message is asked for after NakDelay,
// not after the backoff grown while the first was outstanding.
func TestCore_EachHoleOfALargeMessageGetsAFreshNakDelay(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.NakDelay = time.Millisecond
	cfg.NakMaxDelay = time.Second
	c, _, o := newTestCore(t, cfg)
	a := wire.MustAccount("a")
	big := bytes.Repeat([]byte("q"), 500)
	frag := func(off uint32) []byte {
		return s.packet(2, 1, 0, rec{payload: big[off : off+100], flags: wire.FlagFragment, total: 500, offset: off, account: a})
	}
	ms := int64(time.Millisecond)
	step(t, c, 0, s.msgs(1, 1), frag(0), frag(200), frag(400), s.msgs(3, 1))
	// The first hole is asked for again and again, backing off, while no
	// repair comes: 1, 2, 4, 8, 16... ms apart.
	for now := int64(0); now <= 40*ms; now += ms / 4 {
		c.Tick(now)
	}
	first := len(o.naks(t))
	if first < 4 {
		t.Fatalf("%d NAKs in 40ms for an open hole", first)
	}
	step(t, c, 40*ms, frag(100)) // the first hole is repaired
	// A fresh delay is in [NakDelay/2, 3*NakDelay/2): one NAK by 1.5ms.
	for now := 40 * ms; now <= 40*ms+3*ms/2; now += ms / 4 {
		c.Tick(now)
	}
	naks := o.naks(t)
	if len(naks) != first+1 {
		t.Fatalf("%d NAKs within 1.5ms of the repair, want 1 for the next hole", len(naks)-first)
	}
	want := wire.Nak{Epoch: 1, Session: 77, FromSeq: 2, ToSeq: 2, FromOffset: 200 + 100, ToOffset: 400}
	if got := naks[len(naks)-1]; got != want {
		t.Fatalf("NAK %+v, want %+v", got, want)
	}
}

// TestCore_OtherLiveSessionStopsANodeThatDelivered: once another session
// is live and the followed one fell silent for SessionTimeout, a node that
// delivered messages stops with an error naming both sessions, whatever
// the order of their ids. Before, a restarted sequencer with a smaller id
// (its clock behind) was ignored by every node forever, in silence. While
// the followed one publishes, the other is dropped and counted however
// long it lasts (issue 16: packets alone never stop a node).
func TestCore_OtherLiveSessionStopsANodeThatDelivered(t *testing.T) {
	sec := int64(time.Second)
	for _, tt := range []struct {
		name    string
		session uint64
		silent  bool // the followed session stops publishing
		want    string
	}{
		{"smaller id, old one silent", 5, true, "session 5 publishes while session 77, which this receiver followed, has been silent for 1000ms"},
		{"larger id, old one silent", 78, true, "session 78 publishes while session 77, which this receiver followed, has been silent for 1000ms"},
		{"smaller id, both publish", 5, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStream(t)
			c, _, _ := newTestCore(t, testConfig())
			step(t, c, 0, s.msgs(1, 2))
			next := newStream(t)
			next.session = tt.session
			for i := int64(0); i <= 15 && c.Err() == nil; i++ {
				now := sec/2 + i*sec/10
				_ = c.Step(now, next.heartbeat(1, 0, now))
				if !tt.silent {
					_ = c.Step(now, s.heartbeat(3, 2, now))
				}
			}
			if tt.want == "" {
				if c.Err() != nil || c.Stats().OtherSession == 0 {
					t.Fatalf("both publish: Err() = %v, stats %+v; want no error, OtherSession counted", c.Err(), c.Stats())
				}
				return
			}
			if !errors.Is(c.Err(), ErrNewSession) || !strings.Contains(c.Err().Error(), tt.want) {
				t.Fatalf("Err() = %v, want ErrNewSession with %q", c.Err(), tt.want)
			}
		})
	}
}

// TestCore_NodeThatDeliveredNothingSwitchesToTheLiveSession: a node that
// started on the last heartbeats of a stopped sequencer follows the live
// session instead of dying (or, with an older live id, ignoring it).
func TestCore_NodeThatDeliveredNothingSwitchesToTheLiveSession(t *testing.T) {
	for _, lingering := range []uint64{76, 78} {
		t.Run(fmt.Sprint("lingering=", lingering), func(t *testing.T) {
			cfg := testConfig()
			cfg.Rewind = false
			c, h, _ := newTestCore(t, cfg)
			old := newStream(t)
			old.session = lingering
			step(t, c, 0, old.heartbeat(500, 499, 0))
			live := newStream(t) // session 77
			ms := int64(time.Millisecond)
			for q := uint64(1); q <= 150; q++ {
				step(t, c, int64(q)*10*ms, live.msgs(q, 1))
			}
			if c.Err() != nil || c.Session() != 77 || len(h.got) == 0 || h.got[len(h.got)-1].seq != 150 {
				t.Fatalf("err %v, session %d, delivered %v", c.Err(), c.Session(), h.seqs())
			}
			if c.Stats().SessionSwitch != 1 {
				t.Fatalf("stats %+v, want one switch", c.Stats())
			}
		})
	}
}

// TestCore_FastNodeDivergesWithoutSeeingEpochStartRecord: a fast node that
// misses the one packet holding the EpochStart record must still learn
// that the new epoch began below what it delivered: every header carries
// the epoch's first seq. Before wire v2 it delivered the new epoch on top
// of its own cut messages with no error.
func TestCore_FastNodeDivergesWithoutSeeingEpochStartRecord(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Mode = Fast
	c, h, _ := newTestCore(t, cfg)
	step(t, c, 0, s.packet(1, 1, 0, rec{payload: []byte("1")}, rec{payload: []byte("2")}, rec{payload: []byte("3")}))
	if len(h.got) != 3 {
		t.Fatalf("fast node delivered %v", h.seqs())
	}
	// Epoch 2 starts at 2 (seqs 2 and 3 of epoch 1 were cut). The packet
	// with the EpochStart record (seq 2) is lost; the next one, seqs 3..4
	// of epoch 2, arrives.
	s.epoch, s.epochStart = 2, 2
	err := c.Step(0, s.packet(3, 2, 0, rec{payload: []byte("new3")}, rec{payload: []byte("new4")}))
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("Step = %v, want ErrDiverged; delivered %v", err, h.seqs())
	}
	if len(h.got) != 3 {
		t.Fatalf("delivered %v after the divergence", h.seqs())
	}
}

// TestCore_SafeNodeDropsBufferedRecordsAtOrAboveTheCut: records of the old
// epoch held above the new epoch's first seq were cut by the failover and
// are dropped, even when they were below the old stable that this node saw.
func TestCore_SafeNodeDropsBufferedRecordsAtOrAboveTheCut(t *testing.T) {
	s := newStream(t)
	c, h, _ := newTestCore(t, testConfig())
	step(t, c, 0, s.packet(1, 1, 0, rec{payload: []byte("1")}))
	// Seqs 3 and 4 of epoch 1 arrive out of order (2 is missing).
	step(t, c, 0, s.packet(3, 1, 0, rec{payload: []byte("old3")}, rec{payload: []byte("old4")}))
	// Epoch 2 starts at 3: seqs 3.. of epoch 1 were cut.
	s.epoch, s.epochStart = 2, 3
	start := s.internal(wire.Internal{Type: wire.InternalEpochStart, Epoch: 2})
	step(t, c, 0, s.packet(2, 1, 0, rec{payload: []byte("2")}))
	step(t, c, 0, s.packet(3, 4, 0, start, rec{payload: []byte("new4")}))
	if got := h.seqs(); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("delivered %v", got)
	}
	if h.got[3].payload != "new4" {
		t.Fatalf("seq 4 = %q, want new4", h.got[3].payload)
	}
}
