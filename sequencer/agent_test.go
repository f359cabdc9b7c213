package sequencer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// TestAgent_SequencesOverMem runs the agent on the mem transport and checks
// that a node receives its commands in the stream, and a NAK repair.
func TestAgent_SequencesOverMem(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	var clock int64
	a, err := NewAgent(cfg, net.Server(), func() Time { clock += 1000; return at(clock) })
	if err != nil {
		t.Fatal(err)
	}
	cl := net.Client()
	if err := cl.Send(frame(t, acctA, 1, 0, cmd(1, "one"), cmd(2, "two"))); err != nil {
		t.Fatal(err)
	}
	_ = cl.Flush()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	var stream [][]byte
	retransmits := 0
	nakSent := false
	for deadline := time.Now().Add(30 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no stream after 30s: %d packets", len(stream))
		}
		_, err := cl.Poll(func(f []byte, from transport.Peer) {
			var p wire.Packet
			if wire.DecodePacket(f, &p) != nil {
				return
			}
			if p.Flags&wire.PacketRetransmit != 0 {
				retransmits++
				return
			}
			stream = append(stream, append([]byte(nil), f...))
		}, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got := commands(decodeStream(t, stream, cfg.MaxPacketBytes))
		if len(got) == 2 && !nakSent {
			if got[0] != "one" || got[1] != "two" {
				t.Fatalf("stream %q", got)
			}
			// Ask for seq 1 again, as a receiver that lost it would.
			if err := cl.Send(nakFrame(t, testSession, 1, 1, 0)); err != nil {
				t.Fatal(err)
			}
			_ = cl.Flush()
			nakSent = true
		}
		if retransmits > 0 {
			break
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if st := a.Core().Stats(); st.Commands != 2 || st.Naks != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAgent_SessionStartsAtTheClock: the records New emits first (session
// start, epoch start) carry the agent's clock, not time zero.
func TestAgent_SessionStartsAtTheClock(t *testing.T) {
	net, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Session = 3
	const wall = int64(1_700_000_000_000_000_000)
	a, err := NewAgent(cfg, net.Server(), func() Time { return Time{Mono: 5, Wall: wall} })
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Core().LastTime(); got != wall {
		t.Fatalf("sequencer time %d after NewAgent, want the clock's %d", got, wall)
	}
}
