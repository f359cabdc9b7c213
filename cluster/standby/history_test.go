package standby

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/sequencer"
)

// TestStandby_HistoryFsyncs: once the store is a primary's History, the
// primary's Puts make it durable on the interval policy: on a goroutine
// of the standby's when Run drove it (a real shell), inline when it was
// stepped (a simulator must replay). Before, nothing fsynced it until a
// segment rolled (inline, on the primary's loop) or it closed: Durable
// stayed at the Takeover's cut.
func TestStandby_HistoryFsyncs(t *testing.T) {
	for _, run := range []bool{true, false} {
		src := standbytest.NewStream(t)
		pkts := src.Commands(t, 20)
		cfg := standbyConfig(t, 2)
		cfg.Store.SyncBytes = 512 // every few packets
		s := newStandby(t, cfg, &standbytest.Client{})
		for _, p := range pkts {
			s.frame(p, 0)
		}
		if run {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_ = s.Run(ctx)
			cancel()
		}
		cut := src.Core.Published()
		tk, err := s.Takeover(cut)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		background := s.hist != nil && s.hist.syncer != nil
		s.mu.Unlock()
		if background != run {
			t.Fatalf("Run %v: fsyncs on a goroutine %v", run, background)
		}
		durable := func() uint64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.core.Store().Durable()
		}
		if d := durable(); d != cut {
			t.Fatalf("durable %d after the Takeover, want the cut %d", d, cut)
		}
		// The primary goes on writing what it publishes into its History.
		more := src.Commands(t, 40)
		for _, p := range more {
			tk.History.Put(p, sequencer.PacketInfo{})
		}
		last := src.Core.Published()
		deadline := time.Now().Add(5 * time.Second)
		for durable() < last && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			tk.History.Put(more[len(more)-1], sequencer.PacketInfo{}) // a duplicate: refused, but the turn runs
		}
		if d := durable(); d < last {
			t.Fatalf("Run %v: durable %d, want %d: the History's Puts fsynced nothing", run, d, last)
		}
	}
}

// TestStandby_AcksWithinABatch: in one poll's batch of frames (no turn of
// the loop in between), a written-ack standby acks every AckEveryBytes
// appended, each ack after the bytes reached the OS; with 0 it acks only
// at the end of the turn.
func TestStandby_AcksWithinABatch(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 20)
	for _, every := range []int{1, 0} {
		cfg := standbyConfig(t, 2)
		cfg.AckWritten = true
		cfg.AckEveryBytes = every
		fc := &standbytest.Client{Keep: true}
		s := newStandby(t, cfg, fc)
		for _, p := range pkts {
			s.Step(p, 0)
		}
		acks := fc.Acks(t)
		if every == 0 {
			if len(acks) != 0 {
				t.Fatalf("AckEveryBytes 0: %d acks before the turn", len(acks))
			}
			continue
		}
		if len(acks) < len(pkts)-1 {
			t.Fatalf("%d acks for %d packets of a batch, want one per packet", len(acks), len(pkts))
		}
		for i := 1; i < len(acks); i++ {
			if acks[i].Contiguous <= acks[i-1].Contiguous {
				t.Fatalf("ack %d at %d after %d: acks only when the seq moved", i, acks[i].Contiguous, acks[i-1].Contiguous)
			}
		}
		if last := acks[len(acks)-1].Contiguous; last != src.Core.Published() {
			t.Fatalf("last ack %d, want %d", last, src.Core.Published())
		}
		s.mu.Lock()
		st := s.core.store.Stats()
		s.mu.Unlock()
		if st.Writes < uint64(len(acks)) {
			t.Fatalf("%d writes for %d acks: an ack named bytes the store only buffered", st.Writes, len(acks))
		}
	}
}
