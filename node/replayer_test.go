package node

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// sourceOutbox is an outbox that also reaches repair sources.
type sourceOutbox struct {
	outbox
	to map[receiver.Source][][]byte
}

func (o *sourceOutbox) SendTo(src receiver.Source, f []byte) {
	if o.to == nil {
		o.to = map[receiver.Source][][]byte{}
	}
	o.to[src] = append(o.to[src], bytes.Clone(f))
}

// TestCore_GoneMovesNaksToReplayer: a node with a replayer NAKs the
// sequencer first; when the ring says Gone, the NAK goes to the replayer
// (through SourceOutput), whose repair completes the stream; a Gone from
// the replayer too is fatal and names it.
func TestCore_GoneMovesNaksToReplayer(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Replayers = []string{"replayer-1"}
	h := &recorder{}
	o := &sourceOutbox{}
	c, err := NewCore(cfg, h, o)
	if err != nil {
		t.Fatal(err)
	}
	h.core = c
	step(t, c, 0, s.msgs(10, 2)) // live at 10: seqs 1..9 missing
	c.Tick(int64(time.Second))
	if n := o.naks(t); len(n) != 1 || n[0].FromSeq != 1 {
		t.Fatalf("NAKs to the sequencer %+v, want one from seq 1", n)
	}
	if err := c.StepFrom(0, s.goneRange(1, 9, 10), receiver.Sequencer); err != nil {
		t.Fatal(err)
	}
	c.Tick(int64(2 * time.Second))
	var got []wire.Nak
	for _, f := range o.to[1] {
		var n wire.Nak
		if wire.DecodeNak(f, &n) == nil {
			got = append(got, n)
		}
	}
	if len(got) != 1 || got[0].FromSeq != 1 || got[0].ToSeq != 9 {
		t.Fatalf("NAKs to replayer 1: %+v, want one for 1..9", got)
	}
	if err := c.StepFrom(0, s.msgs(1, 9), 1); err != nil {
		t.Fatal(err)
	}
	if seqs := h.seqs(); !slices.Equal(seqs, seqRange(1, 11)) {
		t.Fatalf("delivered %v", seqs)
	}

	// A second hole that neither the ring nor the replayer holds.
	step(t, c, 0, s.msgs(20, 1))
	c.Tick(int64(3 * time.Second))
	_ = c.StepFrom(0, s.goneRange(12, 19, 20), receiver.Sequencer)
	c.Tick(int64(4 * time.Second))
	err = c.StepFrom(0, s.goneRange(12, 19, 100), 1)
	if !errors.Is(err, ErrUnrecoverable) || !bytes.Contains([]byte(err.Error()), []byte("repair source 1")) {
		t.Fatalf("Gone from the replayer too: %v, want ErrUnrecoverable naming repair source 1", err)
	}
}

// TestNewCore_ReplayersNeedSourceOutput: Replayers with an Output that
// cannot reach them is a configuration error, not NAKs lost in silence.
func TestNewCore_ReplayersNeedSourceOutput(t *testing.T) {
	cfg := testConfig()
	cfg.Replayers = []string{"r"}
	if _, err := NewCore(cfg, &recorder{}, &outbox{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewCore: %v, want ErrConfig", err)
	}
}
