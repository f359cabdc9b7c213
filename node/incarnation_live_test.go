package node

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// liveSink keeps what a sequencer publishes, for nodes to receive.
type liveSink struct{ frames [][]byte }

func (k *liveSink) Publish(pkt []byte)            { k.frames = append(k.frames, bytes.Clone(pkt)) }
func (k *liveSink) SendTo(transport.Peer, []byte) {}

// TestCore_NodeRestartedWithASmallerIncarnationJoiningLiveGetsThrough: a
// node ran as incarnation 100 (a wall-clock reading); it restarts as
// incarnation 50 (the clock stepped back) and joins live, so it never
// sees the announcement of 100. The sequencer drops its frames as stale;
// it must tell the node, which moves above 100 and gets its command
// sequenced. Before, its frames were dropped without a word and its
// command stayed in flight forever (issue 14, item 9).
func TestCore_NodeRestartedWithASmallerIncarnationJoiningLiveGetsThrough(t *testing.T) {
	scfg := sequencer.DefaultConfig()
	scfg.Session = 9
	scfg.RingBytes = 1 << 20
	sink := &liveSink{}
	seqr, err := sequencer.NewSinkShell(scfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	clock := int64(1_700_000_000_000_000_000)
	at := func() sequencer.Time { return sequencer.Time{Mono: clock, Wall: clock} }
	// The earlier life: incarnation 100 sends one command.
	var w wire.CommandWriter
	buf := make([]byte, 4096)
	if err := w.Reset(buf, wire.MustAccount("me"), 0, 100, 9); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Command{CmdSeq: 1, Payload: []byte("old life")}); err != nil {
		t.Fatal(err)
	}
	if err := seqr.Step(at(), w.Bytes(), 1); err != nil {
		t.Fatal(err)
	}
	seqr.Flush(at())

	cfg := testConfig()
	cfg.Rewind = false
	cfg.Incarnation = 50
	c, h, out := newTestCore(t, cfg)
	fed, taken := len(sink.frames), 0 // the old life's packets were before this node
	var sentAt int64
	for i := 0; i < 3000; i++ { // 3 s in 1 ms steps
		clock += int64(time.Millisecond)
		seqr.Tick(at())
		for ; fed < len(sink.frames); fed++ {
			if err := c.Step(clock, sink.frames[fed]); err != nil {
				t.Fatalf("node step: %v", err)
			}
		}
		if c.Started() && sentAt == 0 {
			if _, err := c.Send(clock, []byte("new life")); err != nil {
				t.Fatal(err)
			}
			c.Flush(clock)
			sentAt = clock
		}
		c.Tick(clock)
		for ; taken < len(out.frames); taken++ {
			if k, _ := wire.PeekKind(out.frames[taken]); k == wire.KindCommand {
				_ = seqr.Step(at(), out.frames[taken], 1)
			}
		}
		seqr.Flush(at())
		if c.InFlight() == 0 && sentAt != 0 {
			break
		}
	}
	var mine []string
	for _, d := range h.got {
		if d.mine {
			mine = append(mine, d.payload)
		}
	}
	if c.Err() != nil || c.InFlight() != 0 || len(mine) != 1 || mine[0] != "new life" {
		t.Fatalf("after %v: err %v, %d in flight, delivered as mine %q; node incarnation %d; sequencer stats %+v",
			time.Duration(clock-sentAt), c.Err(), c.InFlight(), mine, c.Incarnation(), seqr.Stats())
	}
	if c.Incarnation() <= 100 {
		t.Fatalf("node incarnation %d, want above 100", c.Incarnation())
	}
}
