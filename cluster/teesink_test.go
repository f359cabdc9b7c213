package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// reentryStore is a new primary's History that notes a Put made while
// its own Range runs, instead of passing it on: the real history
// (lockedStore) holds the standby's lock during Range, and a Put from
// inside it waits forever on that lock.
type reentryStore struct {
	sequencer.RetransmitStore
	ranging    bool
	putInRange int
}

func (s *reentryStore) Range(from, to uint64, fn sequencer.PacketFunc) {
	s.ranging = true
	defer func() { s.ranging = false }()
	s.RetransmitStore.Range(from, to, fn)
}

func (s *reentryStore) Put(pkt []byte, info sequencer.PacketInfo) {
	if s.ranging {
		s.putInRange++
		return
	}
	s.RetransmitStore.Put(pkt, info)
}

// recordServer is a transport.Server that keeps what it is given.
type recordServer struct {
	published [][]byte
	sent      map[transport.Peer]int
}

func (s *recordServer) Publish(f []byte) error {
	s.published = append(s.published, append([]byte(nil), f...))
	return nil
}

func (s *recordServer) SendTo(to transport.Peer, _ []byte) error {
	if s.sent == nil {
		s.sent = map[transport.Peer]int{}
	}
	s.sent[to]++
	return nil
}
func (s *recordServer) Flush() error                                       { return nil }
func (s *recordServer) Poll(transport.Handler, time.Duration) (int, error) { return 0, nil }
func (s *recordServer) Close() error                                       { return nil }

// TestTeeSink_RepairFromTheHistoryToEveryone: two receivers ask a new
// primary, in one batch, for the same seqs below the cut (what every
// node missed when the old primary died); the second answer goes to
// everyone (Publish, MulticastRepairWindow), from the history the
// primary took over. Nothing may be written into the history from
// inside its Range, which holds the standby's lock: when the Core called
// the teeSink from there (a Sink), the Put of that repair made the
// primary's goroutine wait on itself forever, sequencing and repairing
// nothing more while Raft kept it leader (CI: TCP nodes never delivered
// the new epoch). The Core's output is now a Ready the teeSink handles
// after Step returned; and a repair, a packet already stored, is not
// stored again.
func TestTeeSink_RepairFromTheHistoryToEveryone(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 30)
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range pkts {
		s.Step(p, 0)
	}
	const cut = 20
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	hist := &reentryStore{RetransmitStore: tk.History}
	tk.History = hist
	srv := &recordServer{}
	cfg := standbytest.SeqConfig(2, cut+1)
	if cfg.MulticastRepairWindow == 0 {
		t.Fatal("the default config repairs by unicast only: the case is not exercised")
	}
	core, err := sequencer.NewPrimary(cfg, tk)
	if err != nil {
		t.Fatal(err)
	}
	out := newTeeSink(core, srv, hist)
	now := sequencer.Time{Mono: int64(time.Second), Wall: src.Now + 1}
	core.Flush(now)
	out.send(core)
	live := len(srv.published)

	nak, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 2, Session: standbytest.Session, FromSeq: 15, ToSeq: cut})
	if err != nil {
		t.Fatal(err)
	}
	const nodeA, nodeB = transport.Peer(1), transport.Peer(2)
	for _, from := range []transport.Peer{nodeA, nodeB} {
		if err := core.Step(now, nak, from); err != nil {
			t.Fatal(err)
		}
		out.send(core)
	}
	if hist.putInRange != 0 {
		t.Fatalf("%d repair packet(s) written back into the history from inside its Range (a real history deadlocks there)", hist.putInRange)
	}
	if srv.sent[nodeA] == 0 {
		t.Fatal("the first NAK got no unicast answer")
	}
	// The second answer went to everyone, marked a retransmit, from the
	// history (epoch 1), claiming no more than the cut.
	var p wire.Packet
	repaired := false
	for _, b := range srv.published[live:] {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != wire.KindData || p.Flags&wire.PacketRetransmit == 0 {
			continue
		}
		if p.Epoch != 1 || p.LastSeq() < 15 || p.FirstSeq > cut || p.Stable > cut {
			t.Fatalf("repair published: epoch %d seqs %d..%d stable %d, want epoch 1 within 15..%d, stable <= %d", p.Epoch, p.FirstSeq, p.LastSeq(), p.Stable, cut, cut)
		}
		repaired = repaired || p.FirstSeq <= 15
	}
	if !repaired {
		t.Fatal("the second NAK's answer was not published to everyone")
	}
	// Live packets still reach the history (the primary's own epoch
	// begins with its epoch start record, cut+1).
	if newest, ok := tk.History.Newest(); !ok || newest.FirstSeq != cut+1 {
		t.Fatalf("history newest %+v: the new epoch's first packet was not stored", newest)
	}
}

// retainServer is a recordServer that also publishes by reference
// (transport.Retainer), noting what it was given that way.
type retainServer struct {
	recordServer
	retained int
}

func (s *retainServer) PublishRetained(f []byte) error {
	s.retained++
	return s.Publish(f)
}
func (s *retainServer) MaxRetainedBytes() int { return 64 << 10 }

// TestTeeSink_RetainsAndStores: a cluster's primary publishes its ring's
// packets by reference when the transport can (no copy on the way to the
// kernel), and each still reaches its store.
func TestTeeSink_RetainsAndStores(t *testing.T) {
	src := standbytest.NewStream(t)
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range src.Commands(t, 10) {
		s.Step(p, 0)
	}
	const cut = 10
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	srv := &retainServer{}
	cfg := standbytest.SeqConfig(2, cut+1)
	cfg.MaxMessageBytes = 64 << 10 // the ring then holds what the server retains, the margin and one call's output
	core, err := sequencer.NewPrimary(cfg, tk)
	if err != nil {
		t.Fatal(err)
	}
	out := newTeeSink(core, srv, tk.History)
	now := sequencer.Time{Mono: int64(time.Second), Wall: src.Now + 1}
	core.Flush(now)
	out.send(core)
	if srv.retained == 0 {
		t.Fatal("the primary's first packet was published by copy: the teeSink does not pass the transport's retention on")
	}
	if newest, ok := tk.History.Newest(); !ok || newest.FirstSeq != cut+1 {
		t.Fatalf("history newest %+v: the retained packet was not stored", newest)
	}
}
