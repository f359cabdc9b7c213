package node

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seqd/seqd/wire"
)

func incarnation(s *stream, inst uint8, v uint64) rec {
	return s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: wire.MustAccount("me"), Instance: inst, Value: v})
}

func rejection(s *stream, cmdSeq uint64, reason wire.RejectReason, inc int64) rec {
	return s.internal(wire.Internal{Type: wire.InternalRejected, Account: wire.MustAccount("me"), ID: cmdSeq, Value: uint64(reason), Extra: inc})
}

// frameIncarnations lists the incarnation in each command frame sent.
func frameIncarnations(t *testing.T, o *outbox) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range o.frames {
		if k, _ := wire.PeekKind(f); k != wire.KindCommand {
			continue
		}
		var p wire.CommandPacket
		if err := wire.DecodeCommand(f, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Incarnation)
	}
	return out
}

// TestCore_RejectedCommandIsAnErrorAndFreesItsSlot: an InternalRejected
// record for this node's command calls OnRejected with ErrRejected and
// the reason, counts it, frees the window slot, and later commands go on.
// Rejections of another incarnation or instance are not ours.
func TestCore_RejectedCommandIsAnErrorAndFreesItsSlot(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Window = 3
	c, h, o := newTestCore(t, cfg)
	for _, p := range []string{"a", "big", "c"} {
		if _, err := c.Send(0, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	c.Flush(0)
	other := rejection(s, 2, wire.RejectTooLarge, 4) // a previous life's command 2
	step(t, c, 0, s.packet(1, 4, 0, incarnation(s, 0, 5), echo(t, o, 1), other, rejection(s, 2, wire.RejectTooLarge, 5)))
	if !slices.Equal(h.rejected, []uint64{2}) {
		t.Fatalf("OnRejected for %v, want [2]", h.rejected)
	}
	err := h.rejectErrs[0]
	var re *RejectedError
	if !errors.Is(err, ErrRejected) || !errors.As(err, &re) || re.Reason != wire.RejectTooLarge ||
		!strings.Contains(err.Error(), "command 2: command larger than the sequencer's max-message-bytes") {
		t.Fatalf("OnRejected error %v", err)
	}
	if c.InFlight() != 1 || c.Stats().Rejected != 1 || c.Err() != nil {
		t.Fatalf("InFlight %d, Rejected %d, Err %v; want 1, 1, nil", c.InFlight(), c.Stats().Rejected, c.Err())
	}
	if q, err := c.Send(0, []byte("d")); err != nil || q != 4 {
		t.Fatalf("Send after the rejection: %d %v", q, err)
	}
	c.Flush(0)
	step(t, c, 0, s.packet(5, 6, 0, echo(t, o, 3), echo(t, o, 4)))
	if c.InFlight() != 0 || len(h.rejected) != 1 {
		t.Fatalf("InFlight %d, rejections %v", c.InFlight(), h.rejected)
	}
}

// TestCore_SupersededByAnotherIncarnation: once this node sent, its
// identity announced with another incarnation stops it with ErrSuperseded
// (it used to wait forever with a full window).
func TestCore_SupersededByAnotherIncarnation(t *testing.T) {
	for _, v := range []uint64{6, 4} {
		s := newStream(t)
		c, _, o := newTestCore(t, testConfig())
		c.Send(0, []byte("a"))
		c.Send(0, []byte("b"))
		c.Flush(0)
		err := c.Step(0, s.packet(1, 3, 0, incarnation(s, 0, 5), echo(t, o, 1), incarnation(s, 0, v)))
		want := "node: superseded by another incarnation: account me instance 0: incarnation " + strconv.FormatUint(v, 10) + " announced at seq 3 while this process sends as incarnation 5"
		if !errors.Is(err, ErrSuperseded) || err.Error() != want || !errors.Is(c.Err(), ErrSuperseded) {
			t.Fatalf("incarnation %d announced: Step = %v\nwant %s", v, err, want)
		}
	}
	// Another instance's incarnations are not this node's business.
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	c.Send(0, []byte("a"))
	c.Flush(0)
	step(t, c, 0, s.packet(1, 3, 0, incarnation(s, 0, 5), incarnation(s, 1, 9), echo(t, o, 1)))
	if c.InFlight() != 0 {
		t.Fatal("not acked")
	}
}

// TestCore_RestartPicksIncarnationAboveSeen: a node that rewinds over
// earlier lives of its identity before its first command moves above the
// highest incarnation seen, whatever it was configured with.
func TestCore_RestartPicksIncarnationAboveSeen(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig()) // configured 5
	step(t, c, 0, s.packet(1, 3, 0, incarnation(s, 0, 7), incarnation(s, 1, 50), incarnation(s, 0, 3)))
	if c.Incarnation() != 8 || c.Stats().IncarnationBumps != 1 {
		t.Fatalf("Incarnation() = %d after seeing 7 (and 50 of another instance), want 8", c.Incarnation())
	}
	c.Send(0, []byte("a"))
	c.Flush(0)
	if got := frameIncarnations(t, o); !slices.Equal(got, []uint64{8}) {
		t.Fatalf("frames sent as %v, want [8]", got)
	}
	step(t, c, 0, s.packet(4, 5, 0, incarnation(s, 0, 8), echo(t, o, 1)))
	if c.InFlight() != 0 || c.Err() != nil {
		t.Fatalf("InFlight %d, Err %v", c.InFlight(), c.Err())
	}
}

// TestCore_StaleIncarnationMovesAboveAndResends: commands sent under an
// incarnation below one announced before ours are dropped as stale by the
// sequencer; the node moves above it and sends its window again.
func TestCore_StaleIncarnationMovesAboveAndResends(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	c.Send(0, []byte("a"))
	c.Send(0, []byte("b"))
	c.Flush(0)
	o.frames = nil
	step(t, c, 0, s.packet(1, 1, 0, incarnation(s, 0, 9)))
	if c.Incarnation() != 10 || c.Err() != nil {
		t.Fatalf("Incarnation %d, Err %v", c.Incarnation(), c.Err())
	}
	if got := frameIncarnations(t, o); !slices.Equal(got, []uint64{10}) || !slices.Equal(cmdSeqsOf(o.commands(t)), []uint64{1, 2}) {
		t.Fatalf("sent %v as %v, want 1,2 as incarnation 10", cmdSeqsOf(o.commands(t)), got)
	}
	step(t, c, 0, s.packet(2, 4, 0, incarnation(s, 0, 10), echo(t, o, 1), echo(t, o, 2)))
	if c.InFlight() != 0 {
		t.Fatalf("InFlight %d", c.InFlight())
	}
}

// TestCore_EqualIncarnationIsDetected: two processes given one
// incarnation must not ack each other's commands: a command of this
// identity that this process did not send stops it with a clear error.
func TestCore_EqualIncarnationIsDetected(t *testing.T) {
	me := wire.MustAccount("me")
	for _, tc := range []struct {
		name     string
		recs     func(s *stream) []rec
		want     string
		inFlight int
	}{
		{"other payload", func(s *stream) []rec {
			return []rec{incarnation(s, 0, 5), {payload: []byte("twin's"), account: me, cmdSeq: 1}}
		}, "command 1 in the stream differs from the one this process sent (next is 2)", 1},
		{"beyond", func(s *stream) []rec {
			return []rec{incarnation(s, 0, 5), {payload: []byte("a"), account: me, cmdSeq: 1}, {payload: []byte("b"), account: me, cmdSeq: 2}}
		}, "command 2 in the stream is beyond the last one this process sent (next is 2)", 0},
	} {
		s := newStream(t)
		c, _, _ := newTestCore(t, testConfig())
		c.Send(0, []byte("a"))
		c.Flush(0)
		recs := tc.recs(s)
		err := c.Step(0, s.packet(1, uint64(len(recs)), 0, recs...))
		want := "node: another process sends with this account, instance and incarnation: account me instance 0 incarnation 5: " + tc.want
		if !errors.Is(err, ErrDuplicateSender) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: Step = %v\nwant %s", tc.name, err, want)
		}
		if c.InFlight() != tc.inFlight {
			t.Errorf("%s: the twin's command acked ours", tc.name)
		}
	}
}

// TestCore_ForgottenSenderStartsANewIncarnation: a sequencer whose full
// sender table forgot this node expects its next command as cmdSeq 1 of a
// new incarnation (any other is dropped as out of order, forever); the
// node keeps its own numbering for the application.
func TestCore_ForgottenSenderStartsANewIncarnation(t *testing.T) {
	s := newStream(t)
	c, _, o := newTestCore(t, testConfig())
	me := wire.MustAccount("me")
	c.Send(0, []byte("a"))
	c.Send(0, []byte("b"))
	c.Flush(0)
	forgot := s.internal(wire.Internal{Type: wire.InternalSenderForgotten, Account: me, ID: 2, Extra: 5})
	step(t, c, 0, s.packet(1, 4, 0, incarnation(s, 0, 5), echo(t, o, 1), echo(t, o, 2), forgot))
	o.frames = nil
	q, err := c.Send(0, []byte("c"))
	if err != nil || q != 3 {
		t.Fatalf("Send after the forget: %d %v, want number 3", q, err)
	}
	c.Flush(0)
	cs := o.commands(t)
	if got := frameIncarnations(t, o); !slices.Equal(got, []uint64{6}) || !slices.Equal(cmdSeqsOf(cs), []uint64{1}) {
		t.Fatalf("sent cmdSeqs %v as incarnation %v, want 1 as 6", cmdSeqsOf(cs), got)
	}
	step(t, c, 0, s.packet(5, 6, 0, incarnation(s, 0, 6), rec{payload: []byte("c"), account: me, cmdSeq: 1}))
	if c.InFlight() != 0 || c.Err() != nil || c.Stats().Renumbered != 1 {
		t.Fatalf("InFlight %d, Err %v, %+v", c.InFlight(), c.Err(), c.Stats())
	}
}

// TestCore_SenderTableFullRejectsAndRenumbers: a sequencer with no room
// for this new sender rejects its commands without taking their cmdSeqs:
// the node reports the first, then sends the others again from cmdSeq 1
// of a new incarnation, which go through once there is room.
func TestCore_SenderTableFullRejectsAndRenumbers(t *testing.T) {
	s := newStream(t)
	h := &recorder{}
	o := &outbox{}
	c, err := NewCore(testConfig(), h, o)
	if err != nil {
		t.Fatal(err)
	}
	me := wire.MustAccount("me")
	for _, p := range []string{"a", "b", "c"} {
		c.Send(0, []byte(p))
	}
	c.Flush(0)
	o.frames = nil
	step(t, c, 0, s.packet(1, 3, 0, rejection(s, 1, wire.RejectSenderTableFull, 5),
		rejection(s, 2, wire.RejectSenderTableFull, 5), rejection(s, 3, wire.RejectSenderTableFull, 5)))
	if !slices.Equal(h.rejected, []uint64{1}) || !errors.Is(h.rejectErrs[0], ErrRejected) {
		t.Fatalf("rejected %v, want [1] (2 and 3 go again)", h.rejected)
	}
	cs := o.commands(t)
	if got := frameIncarnations(t, o); !slices.Equal(got, []uint64{6}) || !slices.Equal(cmdSeqsOf(cs), []uint64{1, 2}) ||
		string(cs[0].payload) != "b" {
		t.Fatalf("resent %v as %v, want b, c as 1, 2 of incarnation 6", cmdSeqsOf(cs), got)
	}
	step(t, c, 0, s.packet(4, 6, 0, incarnation(s, 0, 6), rec{payload: []byte("b"), account: me, cmdSeq: 1},
		rec{payload: []byte("c"), account: me, cmdSeq: 2}))
	if c.InFlight() != 0 || c.Err() != nil {
		t.Fatalf("InFlight %d, Err %v", c.InFlight(), c.Err())
	}
}
