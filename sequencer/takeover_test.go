package sequencer

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// stateAt rebuilds, as a standby would, the State of a stream up to and
// including seq cut from the packets a core published.
func stateAt(t testing.TB, cfg Config, published [][]byte, cut uint64) *State {
	t.Helper()
	st := NewState(cfg.MaxSenders, 1)
	var p wire.Packet
	var r wire.Record
	for _, pkt := range published {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Seq > cut || r.Seq <= st.LastSeq() {
				continue // past the cut, or a later fragment of a message applied
			}
			if err := st.Apply(&r); err != nil {
				t.Fatalf("apply seq %d: %v", r.Seq, err)
			}
		}
	}
	if st.LastSeq() != cut {
		t.Fatalf("the published stream reaches seq %d, not the cut %d", st.LastSeq(), cut)
	}
	return st
}

func lastRecord(t testing.TB, pkts [][]byte) (wire.Packet, wire.Record) {
	t.Helper()
	var p wire.Packet
	var r wire.Record
	for _, pkt := range pkts {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
		}
	}
	return p, r
}

// TestNewPrimary_DedupesAcrossTheCut: the primary of epoch 2, built from
// the stream up to the cut, drops the resends of commands that made it
// into epoch 1 before the cut, sequences those cut away (and the new
// ones) once, starts at cut+1 with an EpochStart record, and never stamps
// a time before epoch 1's last.
func TestNewPrimary_DedupesAcrossTheCut(t *testing.T) {
	cfg := testConfig()
	old, oldSink := newCore(t, cfg)
	for i := uint64(1); i <= 5; i++ {
		mustStep(t, old, int64(i)*1000, frame(t, acctA, 1, 7, cmd(i, "x")))
		old.Flush(at(int64(i) * 1000))
	}
	// The cut falls just after command 3: commands 4 and 5 were published
	// in epoch 1 but are not in the surviving stream.
	cut := seqOfCommand(t, oldSink.published, 3)
	st := stateAt(t, cfg, oldSink.published, cut)
	// The group tells the new primary the last stamp any member saw (a
	// fast node may have delivered cut records): its clock starts there.
	_, oldLast := lastRecord(t, oldSink.published)
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq = 2, cut+1
	ncfg.StartTime = oldLast.Time
	c, sink := newCoreWith(t, ncfg, Takeover{State: st})
	// The node resends everything it has not seen acked.
	mustStep(t, c, 100, frame(t, acctA, 1, 7, cmd(1, "x"), cmd(2, "x"), cmd(3, "x"), cmd(4, "x"), cmd(5, "x"), cmd(6, "x")))
	c.Flush(at(100))
	if st := c.Stats(); st.Commands != 3 || st.Duplicates != 3 {
		t.Fatalf("stats %+v: want commands 4, 5, 6 sequenced and 1..3 dropped as duplicates", st)
	}
	var p wire.Packet
	var r wire.Record
	if err := wire.DecodePacket(sink.published[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.Epoch != 2 || p.EpochStart != cut+1 || p.FirstSeq != cut+1 || !p.Next(&r) {
		t.Fatalf("first packet of epoch 2: %+v", p)
	}
	var x wire.Internal
	if err := wire.DecodeInternal(r.Payload, &x); err != nil || x.Type != wire.InternalEpochStart || x.Value != cut+1 {
		t.Fatalf("first record of epoch 2: %+v %v", x, err)
	}
	if r.Time < st.LastTime() || r.Time < oldLast.Time {
		t.Fatalf("epoch 2 starts at time %d, before epoch 1's last stamp up to the cut %d (last overall %d)", r.Time, st.LastTime(), oldLast.Time)
	}
	_, last := lastRecord(t, sink.published)
	if last.Seq != cut+4 || last.CmdSeq != 6 {
		t.Fatalf("last record seq %d cmd %d, want seq %d cmd 6", last.Seq, last.CmdSeq, cut+4)
	}
}

// TestNewPrimary_AnswersNaksBelowTheCutFromHistory: a NAK for seqs of the
// earlier epoch is answered from the history store, clipped at the cut,
// and the resent packet claims no stable beyond the cut (it may carry cut
// records).
func TestNewPrimary_AnswersNaksBelowTheCutFromHistory(t *testing.T) {
	cfg := testConfig()
	old, oldSink := newCore(t, cfg)
	// All five commands in one packet: seqs 1..8.
	mustStep(t, old, 1000, frame(t, acctA, 1, 7, cmd(1, "a"), cmd(2, "b"), cmd(3, "c"), cmd(4, "d"), cmd(5, "e")))
	old.Flush(at(1000))
	cut := seqOfCommand(t, oldSink.published, 3)
	st := stateAt(t, cfg, oldSink.published, cut)
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq = 2, cut+1
	c, sink := newCoreWith(t, ncfg, Takeover{State: st, History: old.store})
	c.Flush(at(2000)) // publishes the EpochStart record
	c.SetStable(cut + 1)
	mustStep(t, c, 2000, nakFrame(t, testSession, cut-1, cut+3, 0))
	if len(sink.sent) != 1 {
		t.Fatalf("%d answers, want the one old packet", len(sink.sent))
	}
	var p wire.Packet
	if err := wire.DecodePacket(sink.sent[0].pkt, &p); err != nil {
		t.Fatal(err)
	}
	if p.Epoch != 1 || p.FirstSeq != 1 || p.Stable != cut || p.Flags != wire.PacketRetransmit {
		t.Fatalf("history answer %+v: want epoch 1's packet with stable clipped to the cut %d", p, cut)
	}
	// Without history a NAK below the cut is Gone.
	c2, sink2 := newCoreWith(t, ncfg, Takeover{State: st})
	c2.Flush(at(2000))
	mustStep(t, c2, 2000, nakFrame(t, testSession, cut-1, cut-1, 0))
	var g wire.Gone
	if len(sink2.sent) != 1 || wire.DecodeGone(sink2.sent[0].pkt, &g) != nil || g.FromSeq != cut-1 {
		t.Fatalf("without history: %d answers, want one Gone", len(sink2.sent))
	}
}

func TestNewPrimary_RefusesAStateNotAtTheCut(t *testing.T) {
	cfg := testConfig()
	old, oldSink := newCore(t, cfg)
	mustStep(t, old, 1000, frame(t, acctA, 1, 7, cmd(1, "a")))
	old.Flush(at(1000))
	st := stateAt(t, cfg, oldSink.published, 3)
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq = 2, 5
	if _, err := NewPrimarySinkShell(ncfg, &recordingSink{}, Takeover{State: st}); !errors.Is(err, ErrTakeover) {
		t.Fatalf("state at 3, epoch from 5: %v, want ErrTakeover", err)
	}
	if _, err := NewPrimarySinkShell(ncfg, &recordingSink{}, Takeover{}); !errors.Is(err, ErrTakeover) {
		t.Fatalf("no state: %v, want ErrTakeover", err)
	}
	ncfg.FirstSeq = 4
	ncfg.MaxSenders = cfg.MaxSenders + 1
	if _, err := NewPrimarySinkShell(ncfg, &recordingSink{}, Takeover{State: st}); !errors.Is(err, ErrTakeover) {
		t.Fatalf("another MaxSenders: %v, want ErrTakeover", err)
	}
}

// seqOfCommand is the seq the stream gave command cmdSeq.
func seqOfCommand(t testing.TB, pkts [][]byte, cmdSeq uint64) uint64 {
	t.Helper()
	var p wire.Packet
	var r wire.Record
	for _, pkt := range pkts {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Flags&wire.FlagInternal == 0 && r.CmdSeq == cmdSeq {
				return r.Seq
			}
		}
	}
	t.Fatalf("command %d is not in the stream", cmdSeq)
	return 0
}

func newCoreWith(t testing.TB, cfg Config, tk Takeover) (SinkShell, *recordingSink) {
	t.Helper()
	sink := &recordingSink{}
	c, err := NewPrimarySinkShell(cfg, sink, tk)
	if err != nil {
		t.Fatalf("NewPrimary: %v", err)
	}
	return c, sink
}

// endsStore is a history that knows where its packets' epochs ended, as
// a replayer.Store whose epoch table holds the next epoch does
// (PacketInfo.EpochEnd); end 0 says nothing.
type endsStore struct {
	RetransmitStore
	end uint64
}

func (s endsStore) Range(from, to uint64, fn PacketFunc) {
	s.RetransmitStore.Range(from, to, func(pkt []byte, info PacketInfo) bool {
		info.EpochEnd = s.end
		return fn(pkt, info)
	})
}

// TestNewPrimary_HistoryPacketIsStampedNoHigherThanItsEpochsEnd: a new
// primary knows the cut of the epoch before its own (its start less one),
// not that of older ones. Epoch 1 published seqs 1..8 (one packet), epoch
// 2 cut it at 3 and published 4..5, epoch 3 starts at 6 with a history
// that holds epoch 1's packet (a standby that missed epoch 2, or one
// whose store missed where it began). Stamped with epoch 3's stable, that
// packet would tell a receiver that also skipped epoch 2 that epoch 1
// kept seqs 4 and 5, which it cut (sim seed 1457: a safe node delivered
// a cut seq). It goes with no more than the end of its own epoch: from
// the failover state's cuts or the history's EpochEnd when they know it,
// else with the stable epoch 1's primary gave it (which never passes its
// cut).
func TestNewPrimary_HistoryPacketIsStampedNoHigherThanItsEpochsEnd(t *testing.T) {
	cfg := testConfig()
	const epoch2Start, epoch3Start = 4, 6
	var p wire.Packet
	epoch1 := func() (SinkShell, *State, uint64) {
		ocfg := cfg
		ocfg.Standalone = false // stable moves by quorum: it is still 0 here
		old, oldSink := newCore(t, ocfg)
		mustStep(t, old, 1000, frame(t, acctA, 1, 7, cmd(1, "a"), cmd(2, "b"), cmd(3, "c"), cmd(4, "d"), cmd(5, "e")))
		old.Flush(at(1000))
		if err := wire.DecodePacket(oldSink.published[0], &p); err != nil {
			t.Fatal(err)
		}
		if p.LastSeq() < epoch3Start || p.Stable >= epoch2Start {
			t.Fatalf("epoch 1's packet %+v: want seqs past %d and a stable below %d", p, epoch3Start, epoch2Start)
		}
		return old, stateAt(t, cfg, oldSink.published, epoch3Start-1), p.Stable
	}
	for _, tc := range []struct {
		name  string
		end   uint64     // the history's EpochEnd
		cuts  []EpochCut // the failover state's
		known bool
	}{
		{"end known to the history", epoch2Start - 1, nil, true},
		{"end known to the failover state", 0, []EpochCut{{1, epoch2Start - 1}, {2, epoch3Start - 1}}, true},
		{"end unknown", 0, nil, false},
	} {
		old, st, storedStable := epoch1()
		want := storedStable
		if tc.known {
			want = epoch2Start - 1
		}
		ncfg := cfg
		ncfg.Epoch, ncfg.FirstSeq = 3, epoch3Start
		c, sink := newCoreWith(t, ncfg, Takeover{State: st, History: endsStore{old.store, tc.end}, Cuts: tc.cuts})
		c.Flush(at(2000)) // publishes the EpochStart record
		c.SetStable(epoch3Start)
		mustStep(t, c, 2000, nakFrame(t, testSession, 1, epoch3Start-1, 0))
		if len(sink.sent) != 1 {
			t.Fatalf("%s: %d answers, want the one old packet", tc.name, len(sink.sent))
		}
		if err := wire.DecodePacket(sink.sent[0].pkt, &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch != 1 || p.Stable != want || p.Flags != wire.PacketRetransmit {
			t.Fatalf("%s: history answer of epoch 1 (epoch 2 cut it at %d) carries stable %d, want %d",
				tc.name, epoch2Start-1, p.Stable, want)
		}
	}
}

// TestNewPrimary_EpochStartNamesThePreviousEpoch: the primary of epoch 3,
// taking over at epoch 1's cut (epoch 2 was cut whole), names epoch 1 in
// its EpochStart record (Extra), so a receiver that never heard epoch 2
// learns that it left nothing and where epoch 1 ended
// (receiver.learnEmptyEpochs). A fresh session's names none.
func TestNewPrimary_EpochStartNamesThePreviousEpoch(t *testing.T) {
	cfg := testConfig()
	old, oldSink := newCore(t, cfg)
	mustStep(t, old, 1000, frame(t, acctA, 1, 7, cmd(1, "a"), cmd(2, "b"), cmd(3, "c")))
	old.Flush(at(1000))
	first := func(published [][]byte) wire.Internal {
		t.Helper()
		var p wire.Packet
		var r wire.Record
		var x wire.Internal
		for _, pkt := range published {
			if wire.DecodePacket(pkt, &p) != nil {
				continue
			}
			for p.Next(&r) {
				if wire.DecodeInternal(r.Payload, &x) == nil && x.Type == wire.InternalEpochStart {
					return x
				}
			}
		}
		t.Fatal("no EpochStart record published")
		return x
	}
	if x := first(oldSink.published); x.Epoch != 1 || x.Extra != 0 {
		t.Fatalf("a fresh session's EpochStart %+v, want epoch 1, Extra 0", x)
	}
	cut := seqOfCommand(t, oldSink.published, 2)
	ncfg := cfg
	ncfg.Epoch, ncfg.FirstSeq = 3, cut+1
	c, sink := newCoreWith(t, ncfg, Takeover{State: stateAt(t, cfg, oldSink.published, cut)})
	c.Flush(at(2000))
	if x := first(sink.published); x.Epoch != 3 || x.Value != cut+1 || x.Extra != 1 {
		t.Fatalf("epoch 3's EpochStart %+v, want epoch 3 at %d naming epoch 1 (Extra 1)", x, cut+1)
	}
}
