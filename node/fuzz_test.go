package node

import (
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// FuzzCoreStep feeds arbitrary frames, split from the input, to a core:
// it must never panic, and delivery must stay in order without repeats.
func FuzzCoreStep(f *testing.F) {
	s := newStream(f)
	me := wire.MustAccount("me")
	f.Add(s.msgs(1, 3))
	f.Add(s.heartbeat(5, 4, 100))
	f.Add(s.gone(1, 3))
	f.Add(s.packet(2, 2, 0, rec{payload: []byte("abc"), flags: wire.FlagFragment, total: 10, offset: 3}))
	f.Add(s.packet(1, 1, 0, s.internal(wire.Internal{Type: wire.InternalTimer, Account: me, ID: 1})))
	s.epoch = 3
	f.Add(s.packet(1, 1, 0, s.internal(wire.Internal{Type: wire.InternalEpochStart, Epoch: 3})))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testConfig()
		cfg.PendingRecords = 64
		cfg.Mode = Mode(len(data) % 2)
		cfg.MaxMessageBytes = 1 << 16
		h := &recorder{}
		c, err := NewCore(cfg, h, &outbox{})
		if err != nil {
			t.Fatal(err)
		}
		// Frames are separated by the two bytes 0xFF 0x00 so that one
		// input can hold several frames.
		start := 0
		for i := 0; i <= len(data); i++ {
			if i == len(data) || i+1 < len(data) && data[i] == 0xFF && data[i+1] == 0x00 {
				c.Step(int64(i), data[start:i])
				c.Tick(int64(i) + int64(time.Second))
				start = i + 2
				i++
			}
		}
		var last uint64
		for _, d := range h.got {
			if d.seq <= last {
				t.Fatalf("delivered %d after %d", d.seq, last)
			}
			if last != 0 && d.seq != last+1 {
				t.Fatalf("delivered %d after %d: skipped a seq", d.seq, last)
			}
			last = d.seq
		}
	})
}
