package sequencer

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// retainingSink holds published packets by reference, as a transport that
// sends from the caller's bytes does, with a copy taken at publish time
// to compare against when it "flushes" (before holding more than max
// bytes, or when the test says). Unicast replies are copied.
type retainingSink struct {
	max      int
	held     [][]byte
	copies   [][]byte
	heldB    int
	sent     [][]byte // everything that went out, in order
	replies  int
	retained int
	t        testing.TB
}

func (s *retainingSink) check() {
	s.t.Helper()
	for i, p := range s.held {
		if !bytes.Equal(p, s.copies[i]) {
			s.t.Fatalf("a retained packet changed before it was sent (%d of %d held, %d B)", i, len(s.held), s.heldB)
		}
	}
}

func (s *retainingSink) flush() {
	s.t.Helper()
	s.check()
	s.sent = append(s.sent, s.copies...)
	s.held, s.copies, s.heldB = s.held[:0], nil, 0
}

func (s *retainingSink) PublishRetained(pkt []byte) {
	if s.heldB+len(pkt) > s.max {
		s.flush()
	}
	s.retained++
	s.held = append(s.held, pkt)
	s.copies = append(s.copies, bytes.Clone(pkt))
	s.heldB += len(pkt)
}

func (s *retainingSink) Publish(pkt []byte) {
	s.check()
	s.held = append(s.held, bytes.Clone(pkt))
	s.copies = append(s.copies, bytes.Clone(pkt))
}

func (s *retainingSink) SendTo(_ transport.Peer, pkt []byte) { s.check(); s.replies++ }
func (s *retainingSink) MaxRetainedBytes() int               { return s.max }

// TestCore_RetainedPacketsAreNeverOverwrittenBeforeTheyAreSent: with a
// sink that sends from the ring's bytes, the Core's ring (as small as it
// may be for that sink) wraps many times while packets wait to be sent,
// and NAKs are answered meanwhile (their header patches go on copies):
// every packet goes out as it was published, and the stream is intact.
// A cluster's primary too (not Standalone), whose stable moves with its
// standbys' acks and goes out in heartbeats between the data packets.
func TestCore_RetainedPacketsAreNeverOverwrittenBeforeTheyAreSent(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { retainedStream(t, true) })
	t.Run("cluster", func(t *testing.T) { retainedStream(t, false) })
}

func retainedStream(t *testing.T, standalone bool) {
	cfg := testConfig()
	cfg.Standalone = standalone
	cfg.MaxPacketBytes = 1472
	cfg.MaxMessageBytes = 1024 // one call's output is then a few packets: the ring stays small
	sink := &retainingSink{max: 8 * cfg.MaxPacketBytes, t: t}
	cfg.RingBytes = RetainRingBytes(cfg, sink.max)
	cfg.NakAnswerBytes = 4 * cfg.MaxPacketBytes
	c, err := NewSinkShell(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if c.retainMax == 0 {
		t.Fatal("the Core does not retain with a ring of MaxRetainedBytes + the margin + one call's output")
	}
	now := int64(1000)
	var want []string
	for i := 1; i <= 3000; i++ {
		p := fmt.Sprintf("command %d %s", i, bytes.Repeat([]byte{'x'}, i%300))
		want = append(want, p)
		now += 1000
		if err := c.Step(at(now), frame(t, acctA, 1, 1, cmd(uint64(i), p)), 1); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			c.Flush(at(now))
		}
		if i%37 == 0 && c.tail > 20 {
			b, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 1, Session: testSession, FromSeq: c.tail - 10, ToSeq: c.tail})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Step(at(now), b, 2); err != nil {
				t.Fatal(err)
			}
		}
		if i%101 == 0 {
			sink.flush()
		}
		if !standalone && i%7 == 0 && c.Published() > 3 {
			c.SetStable(c.Published() - 3)
			c.Tick(at(now))
		}
	}
	c.Flush(at(now))
	sink.flush()
	if sink.retained == 0 || sink.replies == 0 {
		t.Fatalf("%d packets retained, %d repairs: the test did not exercise both", sink.retained, sink.replies)
	}
	var data [][]byte
	for _, p := range sink.sent {
		if k, _ := wire.PeekKind(p); k == wire.KindData {
			data = append(data, p)
		}
	}
	got := commands(decodeStream(t, data, cfg.MaxPacketBytes))
	if len(got) != len(want) {
		t.Fatalf("%d commands in the stream, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("command %d is %q, want %q", i+1, got[i], want[i])
		}
	}
}

// TestCore_NoRetainWithARingTooSmall: a ring that cannot hold what the
// sink retains, the margin and one call's output gets every packet by
// copy.
func TestCore_NoRetainWithARingTooSmall(t *testing.T) {
	cfg := testConfig()
	sink := &retainingSink{max: 8 * cfg.MaxPacketBytes, t: t}
	cfg.RingBytes = RetainRingBytes(cfg, sink.max) - 1
	c, err := NewSinkShell(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if c.retainMax != 0 {
		t.Fatal("retaining with a ring smaller than MaxRetainedBytes + the margin + one call's output")
	}
}
