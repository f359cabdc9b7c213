package receiver

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// FuzzReceiverStep feeds arbitrary frames, between valid ones, to a
// receiver: it must never panic, never deliver a seq twice or out of
// order, never exceed its budget, and a malformed frame must change
// nothing but a counter.
func FuzzReceiverStep(f *testing.F) {
	s := newStream(f)
	f.Add(s.msgs(1, 3), uint8(0))
	f.Add(s.heartbeat(9, 8, 100), uint8(1))
	f.Add(s.gone(2, 8, 9), uint8(0))
	f.Add(s.packet(2, 2, 0, rec{payload: make([]byte, 100), flags: wire.FlagFragment, total: 1 << 20, offset: 500}), uint8(2))
	f.Add(s.packet(2, 1<<50, 0, rec{payload: []byte("x")}), uint8(0))
	e2 := newStream(f)
	e2.epoch, e2.epochStart = 2, 3
	f.Add(e2.msgs(3, 2), uint8(3))
	f.Add(e2.packet(2, 4, 0, rec{payload: []byte("cut")}), uint8(0))
	f.Fuzz(func(t *testing.T, frame []byte, mode uint8) {
		cfg := testConfig()
		cfg.Mode = Mode(mode & 1)
		cfg.PendingRecords = 64
		cfg.MaxReceiveMessageBytes = 1 << 20
		cfg.MaxReassemblyBytes = 1 << 20
		cfg.StatusInterval = 1000
		cfg.RepairSources = int(mode>>1) & 3
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		last := uint64(0)
		check := func() {
			r.checkInvariants()
			for _, m := range r.Ready().Deliver {
				if m.Seq != last+1 && last != 0 {
					t.Fatalf("delivered %d after %d", m.Seq, last)
				}
				last = m.Seq
			}
			r.Advance()
			if r.used > cfg.MaxReassemblyBytes || r.used < 0 {
				t.Fatalf("budget %d", r.used)
			}
		}
		good := newStream(t)
		_ = r.Step(0, good.msgs(1, 2), Sequencer)
		check()
		for i := 0; i < 3; i++ {
			st0 := r.Stats()
			before, below, jump, other := st0.Malformed, st0.EpochBelowStable, st0.EpochJumpHeld, st0.OtherSession
			err := r.Step(int64(i)*1e6, frame, Source(mode>>4)%3)
			counted := r.Stats().Malformed != before ||
				errors.Is(err, ErrEpochBelowStable) && r.Stats().EpochBelowStable != below ||
				errors.Is(err, ErrEpochJump) && r.Stats().EpochJumpHeld != jump ||
				errors.Is(err, ErrOtherSession) && r.Stats().OtherSession != other
			if err != nil && r.Err() == nil && !counted {
				t.Fatalf("error %v without a count", err)
			}
			r.Tick(int64(i) * 1e9)
			check()
		}
		_ = r.Step(5e9, good.msgs(3, 2), Sequencer)
		r.Tick(6e9)
		check()
	})
}
