package cluster

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// step is one input to a Quorum in a table test.
type step struct {
	op      string // "reset", "voters", "ack", "self"
	epoch   uint32
	member  uint64
	seq     uint64
	voters  []uint64
	counted bool   // for "ack": whether it must count
	stable  uint64 // Stable after the step
}

func TestQuorum_Table(t *testing.T) {
	three := []uint64{1, 2, 3}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the primary alone is no quorum", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 50},
		}},
		{"one standby makes two of three", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 50},
			{op: "ack", epoch: 1, member: 2, seq: 40, counted: true, stable: 40},
			{op: "ack", epoch: 1, member: 3, seq: 45, counted: true, stable: 45},
			{op: "ack", epoch: 1, member: 2, seq: 60, counted: true, stable: 50},
		}},
		{"acks never go back", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 50},
			{op: "ack", epoch: 1, member: 2, seq: 40, counted: true, stable: 40},
			{op: "ack", epoch: 1, member: 2, seq: 30, counted: true, stable: 40},
		}},
		{"two standbys are a quorum without the primary", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "ack", epoch: 1, member: 2, seq: 40, counted: true},
			{op: "ack", epoch: 1, member: 3, seq: 40, counted: true, stable: 40},
			{op: "self", seq: 10, stable: 40},
		}},
		{"an ack of an older epoch never counts", []step{
			{op: "reset", epoch: 2, member: 1, voters: three, seq: 100, stable: 100},
			{op: "self", seq: 150, stable: 100},
			{op: "ack", epoch: 1, member: 2, seq: 140, stable: 100},
			{op: "ack", epoch: 1, member: 3, seq: 140, stable: 100},
			{op: "ack", epoch: 3, member: 3, seq: 140, stable: 100}, // nor a newer one
			{op: "ack", epoch: 2, member: 3, seq: 120, counted: true, stable: 120},
		}},
		{"a non-member never counts", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 50},
			{op: "ack", epoch: 1, member: 9, seq: 50},
			{op: "ack", epoch: 1, member: 0, seq: 50},
		}},
		{"the primary's id on the network never speaks for it", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "ack", epoch: 1, member: 1, seq: 50},
			{op: "ack", epoch: 1, member: 2, seq: 50, counted: true},
		}},
		{"a removed member's acks stop counting at once", []step{
			{op: "reset", epoch: 1, member: 1, voters: []uint64{1, 2, 3, 4, 5}},
			{op: "self", seq: 100},
			{op: "ack", epoch: 1, member: 2, seq: 80, counted: true},
			{op: "ack", epoch: 1, member: 3, seq: 70, counted: true, stable: 70},
			{op: "voters", voters: []uint64{1, 2, 4, 5}, stable: 70}, // 3 removed: 100, 80, 0, 0 -> 0, stable kept
			{op: "ack", epoch: 1, member: 3, seq: 100, stable: 70},
			{op: "ack", epoch: 1, member: 4, seq: 90, counted: true, stable: 80}, // 100, 90, 80, 0
		}},
		{"a removed then re-added member starts from nothing", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 100},
			{op: "ack", epoch: 1, member: 3, seq: 90, counted: true, stable: 90},
			{op: "voters", voters: []uint64{1, 2}, stable: 90},
			{op: "voters", voters: three, stable: 90},
			{op: "ack", epoch: 1, member: 2, seq: 95, counted: true, stable: 95}, // 3's 90 was forgotten: 100, 95, 0
		}},
		{"an added voter counts from the change", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 100},
			{op: "ack", epoch: 1, member: 4, seq: 100},
			{op: "voters", voters: []uint64{1, 2, 3, 4}},
			{op: "ack", epoch: 1, member: 4, seq: 100, counted: true},            // 100, 100, 0, 0
			{op: "ack", epoch: 1, member: 2, seq: 60, counted: true, stable: 60}, // 100, 100, 60, 0
		}},
		{"an epoch change forgets every position", []step{
			{op: "reset", epoch: 1, member: 1, voters: three},
			{op: "self", seq: 100},
			{op: "ack", epoch: 1, member: 2, seq: 100, counted: true, stable: 100},
			{op: "reset", epoch: 2, member: 2, voters: three, seq: 100, stable: 100},
			{op: "ack", epoch: 1, member: 3, seq: 300, stable: 100},
			{op: "ack", epoch: 2, member: 1, seq: 300, counted: true, stable: 100}, // the old primary, a standby now
			{op: "self", seq: 250, stable: 250},
		}},
		{"five members need three", []step{
			{op: "reset", epoch: 4, member: 5, voters: []uint64{1, 2, 3, 4, 5}},
			{op: "self", seq: 100},
			{op: "ack", epoch: 4, member: 1, seq: 90, counted: true},
			{op: "ack", epoch: 4, member: 2, seq: 80, counted: true, stable: 80},
			{op: "ack", epoch: 4, member: 3, seq: 95, counted: true, stable: 90},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQuorum()
			for i, s := range tt.steps {
				switch s.op {
				case "reset":
					if err := q.Reset(s.epoch, s.member, s.voters, s.seq); err != nil {
						t.Fatalf("step %d: Reset: %v", i, err)
					}
				case "voters":
					if err := q.SetVoters(s.voters); err != nil {
						t.Fatalf("step %d: SetVoters: %v", i, err)
					}
				case "self":
					q.SetSelf(s.seq)
				case "ack":
					if got := q.Ack(s.member, s.epoch, s.seq); got != s.counted {
						t.Errorf("step %d: Ack(member %d, epoch %d, seq %d) counted %v, want %v", i, s.member, s.epoch, s.seq, got, s.counted)
					}
				}
				if got := q.Stable(); got != s.stable {
					t.Fatalf("step %d (%s): stable %d, want %d", i, s.op, got, s.stable)
				}
			}
		})
	}
}

func TestQuorum_TooManyVoters(t *testing.T) {
	q := NewQuorum()
	ids := make([]uint64, MaxVoters+1)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	if err := q.Reset(1, 1, ids, 0); !errors.Is(err, ErrTooManyVoters) {
		t.Fatalf("Reset with %d voters: %v, want ErrTooManyVoters", len(ids), err)
	}
	if q.Ack(uint64(MaxVoters+1), 1, 5) {
		t.Error("the voter past the capacity counted")
	}
}

func TestQuorum_AckAllocatesNothing(t *testing.T) {
	q := NewQuorum()
	if err := q.Reset(1, 1, []uint64{1, 2, 3, 4, 5}, 0); err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		seq++
		q.SetSelf(seq)
		q.Ack(2, 1, seq)
		q.Ack(3, 1, seq)
		q.Ack(9, 1, seq)
	}); n != 0 {
		t.Errorf("Ack and SetSelf: %v allocations per run, want 0", n)
	}
	if q.Stable() != seq {
		t.Errorf("stable %d, want %d", q.Stable(), seq)
	}
}

func BenchmarkQuorum_Ack(b *testing.B) {
	q := NewQuorum()
	if err := q.Reset(1, 1, []uint64{1, 2, 3}, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Ack(uint64(2+i&1), 1, uint64(i))
	}
}

// TestSharedQuorum_AckPathAllocatesNothing: a standby's ack from the wire
// to the primary's stable (Core.Step, TakeStandbyAcks, Update, SetStable)
// allocates nothing, and stable needs a quorum.
func TestSharedQuorum_AckPathAllocatesNothing(t *testing.T) {
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Standalone, cfg.RingBytes = 3, false, 1<<20
	c, err := sequencer.NewSinkShell(cfg, nopSink{})
	if err != nil {
		t.Fatal(err)
	}
	now := sequencer.Time{Mono: 1, Wall: 1}
	c.Flush(now) // seqs 1 (session start) and 2 (epoch start)
	sq := NewSharedQuorum()
	if err := sq.Reset(1, 1, []uint64{1, 2, 3}, 0); err != nil {
		t.Fatal(err)
	}
	ack := func(member uint64) []byte {
		b, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{Session: 3, Epoch: 1,
			Flags: wire.StatusStandby, Contiguous: 2, Delivered: 2, Member: member})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	old, stranger, good := ack(2), ack(9), ack(2)
	old[16] = 0 // epoch 0
	buf := make([]sequencer.StandbyAck, 0, 64)
	round := func(f []byte) {
		_ = c.Step(now, f, 1)
		buf = c.TakeStandbyAcks(buf[:0])
		c.SetStable(sq.Update(buf, c.Published()))
	}
	round(old)
	round(stranger)
	if c.Stable() != 0 {
		t.Fatalf("stable %d from acks that must not count", c.Stable())
	}
	if n := testing.AllocsPerRun(1000, func() { round(good) }); n != 0 {
		t.Fatalf("%v allocations per ack, want 0", n)
	}
	if c.Stable() != 2 {
		t.Fatalf("stable %d, want 2", c.Stable())
	}
}

type nopSink struct{}

func (nopSink) Publish([]byte)                {}
func (nopSink) SendTo(transport.Peer, []byte) {}
