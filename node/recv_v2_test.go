package node

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// Tests of issue 6's receiving items; each fails on the code before the
// receiver package.

// TestCore_ForgedFragmentReservesNoMemory: one forged 308-byte packet
// declaring a 128 MiB message reserved 128 MiB; buffers now grow with the
// bytes that arrived.
func TestCore_ForgedFragmentReservesNoMemory(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.MaxReceiveMessageBytes = 128 << 20
	cfg.MaxReassemblyBytes = 128 << 20
	c, _, _ := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(1, 1))
	forged := s.packet(2, 1, 0, rec{payload: make([]byte, 220), flags: wire.FlagFragment, total: 128 << 20, account: wire.MustAccount("evil")})
	if len(forged) != 308 {
		t.Fatalf("forged packet is %d bytes", len(forged))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	step(t, c, 0, forged)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("a 308-byte packet made the node allocate %d bytes", got)
	}
}

// TestCore_OtherAccountsMessageAboveTheSendLimitIsDelivered: the receive
// limit is not the send limit; before, a message larger than this node's
// MaxMessageBytes stopped it.
func TestCore_OtherAccountsMessageAboveTheSendLimitIsDelivered(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.MaxMessageBytes = 1000
	c, h, _ := newTestCore(t, cfg)
	big := bytes.Repeat([]byte("b"), 3000)
	var frames [][]byte
	for off := 0; off < len(big); off += 1000 {
		frames = append(frames, s.packet(1, 1, 0, rec{payload: big[off : off+1000], flags: wire.FlagFragment, total: 3000, offset: uint32(off), account: wire.MustAccount("other")}))
	}
	step(t, c, 0, frames...)
	if c.Err() != nil || len(h.got) != 1 || h.got[0].payload != string(big) {
		t.Fatalf("err %v, delivered %d messages", c.Err(), len(h.got))
	}
	if _, err := c.Send(0, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send above the send limit: %v", err)
	}
}

// TestCore_GapErrorNamesTheWholeMissingRange: the range was capped at the
// receive window ("seqs 1..65536 no longer retained (oldest 69553)").
func TestCore_GapErrorNamesTheWholeMissingRange(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(69553, 1))
	c.Tick(int64(time.Second))
	naks := o.naks(t)
	if len(naks) != 1 {
		t.Fatalf("NAKs %+v", naks)
	}
	err := c.Step(0, s.goneRange(naks[0].FromSeq, naks[0].ToSeq, 69553))
	want := "receiver: unrecoverable gap: seqs 1..69552 no longer retained by sequencer (oldest 69553)"
	if !errors.Is(err, ErrUnrecoverable) || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
}

// TestCore_WildStableIsIgnored: a stable far beyond anything published is
// counted and ignored; before, a safe node delivered on it.
func TestCore_WildStableIsIgnored(t *testing.T) {
	s := newStream(t)
	c, h, o := newTestCore(t, testConfig())
	step(t, c, 0, s.packet(1, 1<<40, 0, rec{payload: []byte("a")}, rec{payload: []byte("b")}))
	c.Tick(int64(time.Second))
	if len(h.got) != 0 || len(o.naks(t)) != 0 || c.Stats().WildStable != 1 {
		t.Fatalf("delivered %v, NAKs %+v, stats %+v", h.seqs(), o.naks(t), c.Stats())
	}
}

// TestCore_EpochChangesOnlyWithAValidStart: a newer epoch whose start lies
// below the current epoch's start is counted and dropped; before, it was
// followed.
func TestCore_EpochChangesOnlyWithAValidStart(t *testing.T) {
	s := newStream(t)
	s.epoch, s.epochStart = 2, 10
	cfg := testConfig()
	cfg.Rewind = false
	c, h, _ := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(10, 2))
	bad := newStream(t)
	bad.epoch, bad.epochStart = 3, 5
	step(t, c, 0, bad.packet(12, 12, 0, rec{payload: []byte("forged")}))
	if c.Epoch() != 2 || len(h.got) != 2 || c.Stats().BadEpoch != 1 {
		t.Fatalf("epoch %d, delivered %v, stats %+v", c.Epoch(), h.seqs(), c.Stats())
	}
}

// TestCore_GoneOfAnotherEpochIsIgnored: only the current epoch's source is
// believed; before, a deposed primary's Gone stopped the node.
func TestCore_GoneOfAnotherEpochIsIgnored(t *testing.T) {
	s := newStream(t)
	s.epoch = 2
	c, h, _ := newTestCore(t, testConfig())
	step(t, c, 0, s.msgs(1, 1), s.msgs(3, 1))
	c.Tick(int64(time.Second))
	old := newStream(t)
	old.epoch = 1
	step(t, c, 0, old.goneRange(2, 2, 3))
	step(t, c, 0, s.msgs(2, 1))
	if c.Err() != nil || !slices.Equal(h.seqs(), []uint64{1, 2, 3}) {
		t.Fatalf("err %v, delivered %v", c.Err(), h.seqs())
	}
}

// TestCore_RepairBelowTheCutIsAcceptedAfterTheNewEpoch: a repair of a seq
// below the cut, in its own epoch's packet (from a ring or a replayer),
// completes the stream after the next epoch began; each message's epoch
// follows from its seq. Before, the repair was fenced and the node hung.
func TestCore_RepairBelowTheCutIsAcceptedAfterTheNewEpoch(t *testing.T) {
	one := newStream(t)
	two := newStream(t)
	two.epoch, two.epochStart = 2, 3
	c, h, _ := newTestCore(t, testConfig())
	var epochs []uint32
	h.onMessage = func(m *Message) { epochs = append(epochs, m.Epoch) }
	step(t, c, 0, one.packet(1, 1, 0, rec{payload: []byte("1")}))
	step(t, c, 0, two.packet(3, 3, 0, rec{payload: []byte("3")}))
	step(t, c, 0, one.packet(2, 2, 0, rec{payload: []byte("2")})) // repair from the ring
	if !slices.Equal(h.seqs(), []uint64{1, 2, 3}) || !slices.Equal(epochs, []uint32{1, 1, 2}) {
		t.Fatalf("delivered %v in epochs %v", h.seqs(), epochs)
	}
}

// TestCore_StatusFramesReportThePosition: the node reports its position to
// the sequencer every StatusInterval; a read-only node says so.
func TestCore_StatusFramesReportThePosition(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.StatusInterval = 10 * time.Millisecond
	cfg.ReadOnly = true
	c, _, o := newTestCore(t, cfg)
	step(t, c, 0, s.msgs(1, 4))
	c.Tick(int64(time.Millisecond))
	var st []wire.Status
	for _, f := range o.frames {
		var x wire.Status
		if wire.DecodeStatus(f, &x) == nil {
			st = append(st, x)
		}
	}
	want := wire.Status{Session: 77, Epoch: 1, Flags: wire.StatusReadOnly, Account: wire.MustAccount("me"), Incarnation: 5, Contiguous: 4, Delivered: 4}
	if len(st) != 1 || st[0] != want {
		t.Fatalf("status frames %+v\nwant [%+v]", st, want)
	}
}

// TestConfig_RewindIsOffByDefault: a node starts from the live tail until
// replayers exist; before, it rewound from seq 1 and died when the ring no
// longer held it.
func TestConfig_RewindIsOffByDefault(t *testing.T) {
	d := DefaultConfig()
	if d.Rewind {
		t.Fatal("DefaultConfig().Rewind = true")
	}
	if d.StatusInterval <= 0 || d.MaxReceiveMessageBytes < d.MaxMessageBytes {
		t.Fatalf("defaults %+v", d)
	}
}
