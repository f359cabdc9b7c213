package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/seqd/seqd/wire"
)

type oobRecorder struct{ got []string }

func (o *oobRecorder) OnMessage(m *Message) { o.got = append(o.got, fmt.Sprintf("msg %d", m.Seq)) }
func (o *oobRecorder) OnOOB(m *Message) {
	o.got = append(o.got, fmt.Sprintf("oob %d %s", m.Seq, m.Payload))
}

// An out-of-band message comes to OnOOB as its packet arrives, ahead of
// the gap before it, once however often it arrives; in order it comes
// to OnMessage again only with OOBInOrder.
func TestCore_OOBAheadOfAGap(t *testing.T) {
	for _, inOrder := range []bool{false, true} {
		t.Run(fmt.Sprintf("OOBInOrder=%v", inOrder), func(t *testing.T) {
			cfg := testConfig()
			cfg.Rewind, cfg.Mode = false, Fast
			cfg.OOBInOrder = inOrder
			h := &oobRecorder{}
			c, err := NewCore(cfg, h, &outbox{})
			if err != nil {
				t.Fatal(err)
			}
			s := newStream(t)
			other := wire.MustAccount("other")
			step(t, c, 1, s.packet(1, 2, 1000, rec{payload: []byte("a"), account: other, cmdSeq: 1}, rec{payload: []byte("b"), account: other, cmdSeq: 2}))
			oob := s.packet(4, 2, 4000, rec{payload: []byte("urgent"), account: other, cmdSeq: 4, flags: wire.FlagOOB})
			step(t, c, 2, oob, oob) // seq 3 is missing; 4 arrives twice
			step(t, c, 3, s.packet(3, 2, 3000, rec{payload: []byte("c"), account: other, cmdSeq: 3}))
			want := []string{"msg 1", "msg 2", "oob 4 urgent", "msg 3"}
			if inOrder {
				want = append(want, "msg 4")
			}
			if !slices.Equal(h.got, want) {
				t.Fatalf("got %q, want %q", h.got, want)
			}
			if c.Delivered() != 4 || c.Stats().OOBEarly != 1 {
				t.Fatalf("delivered %d, early %d", c.Delivered(), c.Stats().OOBEarly)
			}
		})
	}
}
