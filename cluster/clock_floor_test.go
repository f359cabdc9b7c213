package cluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// keepAll keeps every packet a primary publishes, heartbeats included.
type keepAll struct{ pkts [][]byte }

func (k *keepAll) Publish(p []byte)              { k.pkts = append(k.pkts, bytes.Clone(p)) }
func (k *keepAll) SendTo(transport.Peer, []byte) {}

// TestClockFloor_NewPrimaryStartsAfterTheLastHeartbeat: a live node's
// Now() follows the old primary's heartbeats; the new primary's clock
// starts no earlier than the last one its standby saw, so a live node's
// Now() does not go back across the failover (guarantee 4, issue 14 item
// 13). On 9764a82 the floor was the last checkpoint's time and the
// State's last record's: the epoch's first record was stamped a second
// below the heartbeat the standby had seen.
func TestClockFloor_NewPrimaryStartsAfterTheLastHeartbeat(t *testing.T) {
	sink := &keepAll{}
	src, err := sequencer.NewSinkShell(standbytest.SeqConfig(1, 1), sink)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	for q := uint64(1); q <= 5; q++ {
		now += 1000
		at := sequencer.Time{Mono: now, Wall: now}
		if err := src.Step(at, standbytest.CmdFrame(t, q, "x"), 1); err != nil {
			t.Fatal(err)
		}
		src.Flush(at)
	}
	lastRecord := src.LastTime()
	// Idle: the primary heartbeats a second later, then dies.
	now += int64(time.Second)
	src.Tick(sequencer.Time{Mono: now, Wall: now})
	var hb int64
	var h wire.Packet
	for _, p := range sink.pkts {
		if k, _ := wire.PeekKind(p); k == wire.KindHeartbeat && wire.DecodePacket(p, &h) == nil {
			hb = max(hb, h.BaseTime)
		}
	}
	if hb <= lastRecord {
		t.Fatalf("heartbeat at %d, last record at %d: the test needs a later heartbeat", hb, lastRecord)
	}
	s := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range sink.pkts {
		s.Step(p, 0)
	}
	cut := s.Contiguous()
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	cfg := standbytest.SeqConfig(2, cut+1)
	cfg.StartTime = clockFloor(fsm.Initial(), s)
	core, err := sequencer.NewPrimary(cfg, tk)
	if err != nil {
		t.Fatal(err)
	}
	core.Flush(sequencer.Time{Mono: now, Wall: lastRecord + 1}) // a clock behind the old primary's
	if got := core.LastTime(); got < hb {
		t.Fatalf("the new epoch is stamped %d, below the old primary's last heartbeat %d (last record %d)", got, hb, lastRecord)
	}
}

// TestClockFloor_CountsAnotherMembersLastStamp: the surviving member that
// cannot take over (member B, a broken store) saw a later sequencer time
// than the one that becomes primary (the old primary's last heartbeat
// reached B only). B's seal answer carries its LastStamp over the peer
// port, and the new epoch starts no earlier (issue 14 item 13). On
// 0727298 the wire seal answer had no stamp and the floor was the new
// primary's own standby's: "the new epoch is stamped ..., below member
// B's last stamp".
func TestClockFloor_CountsAnotherMembersLastStamp(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.primary()
	e := old.node.State().Epoch()
	var rest []*member
	for _, m := range c.members {
		m.fol.set(old.node.Status().Published)
		if m != old {
			rest = append(rest, m)
		}
	}
	stamp := time.Now().Add(time.Hour).UnixNano()
	b := rest[0]
	b.fol.mu.Lock()
	b.fol.failTakeover, b.fol.stamp = true, stamp
	b.fol.mu.Unlock()
	old.stop()
	p := rest[1]
	for deadline := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		if p.node.Role() == RolePrimary && p.node.State().Epoch() > e && p.node.State().Primary() == p.cfg.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d never became primary: %+v", p.cfg.ID, p.node.Status())
		}
	}
	for deadline := time.Now().Add(wait); p.node.lastStamp.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new primary stamped nothing")
		}
	}
	if got := p.node.lastStamp.Load(); got < stamp {
		t.Fatalf("the new epoch is stamped %d, below member B's last stamp %d (%v early)", got, stamp, time.Duration(stamp-got))
	}
}
