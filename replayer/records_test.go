package replayer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestStore_RecordsReplaysEpochsExactly: walking each epoch's range from
// the epoch table yields exactly that epoch's messages, whole (fragments
// reassemble), with their bytes, across segments and after a reopen.
func TestStore_RecordsReplaysEpochsExactly(t *testing.T) {
	st := mixed(3000)
	dir := writeStore(t, st)
	s, _ := mustOpen(t, dir, testConfig())
	defer s.Close()
	last := s.Contiguous()
	epochs := s.Epochs()
	if len(epochs) != 3 {
		t.Fatalf("Epochs = %+v", epochs)
	}
	next := uint64(1)
	for i, e := range epochs {
		end := last
		if i+1 < len(epochs) {
			end = epochs[i+1].Start - 1
		}
		var msg []byte
		s.Records(e.Start, end, func(r *wire.Record, epoch uint32) bool {
			if epoch != e.Epoch {
				t.Fatalf("seq %d: epoch %d, want %d", r.Seq, epoch, e.Epoch)
			}
			if r.Seq != next || uint32(len(msg)) != r.Offset {
				t.Fatalf("seq %d offset %d, want seq %d offset %d", r.Seq, r.Offset, next, len(msg))
			}
			msg = append(msg, r.Payload...)
			if uint32(len(msg)) == r.Total {
				if !bytes.Equal(msg, payload(r.Seq, int(r.Total))) {
					t.Fatalf("seq %d: wrong bytes", r.Seq)
				}
				msg, next = msg[:0], next+1
			}
			return true
		})
		if next != end+1 {
			t.Fatalf("epoch %d (%d..%d): walk ended before seq %d", e.Epoch, e.Start, end, next)
		}
	}
	// An arbitrary window yields its seqs only, and stops on false.
	n := 0
	s.Records(500, 510, func(r *wire.Record, _ uint32) bool {
		if r.Seq < 500 || r.Seq > 510 {
			t.Fatalf("seq %d outside 500..510", r.Seq)
		}
		n++
		return r.Seq < 505
	})
	if n < 6 {
		t.Fatalf("%d records", n)
	}
	fn := func(*wire.Record, uint32) bool { return true }
	if a := testing.AllocsPerRun(100, func() { s.Records(1000, 1100, fn) }); a != 0 {
		t.Fatalf("Records allocates %v", a)
	}
}
