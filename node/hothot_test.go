package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// stock is a hot-hot handler: every order from the load account takes
// one item if any is left and answers "sold ORDER" or "out ORDER"; its
// digest covers every order it applied, in order.
type stock struct {
	core    *Core
	left    int
	digest  uint64
	applied uint64 // last seq applied
	sendErr []error
	events  []string
}

var loadAcct = wire.MustAccount("load")

func (s *stock) OnMessage(m *Message) {
	s.applied = m.Seq
	if m.Internal() || m.Account != loadAcct {
		return
	}
	answer := "out "
	if s.left > 0 {
		s.left--
		answer = "sold "
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d %s%s", s.digest, answer, m.Payload)
	s.digest = h.Sum64()
	if _, err := s.core.Send(s.core.clock, []byte(answer+string(m.Payload))); err != nil {
		s.sendErr = append(s.sendErr, err)
	}
}

func (s *stock) OnActivated()   { s.events = append(s.events, "activated") }
func (s *stock) OnDeactivated() { s.events = append(s.events, "deactivated") }

// pair is a sequencer core, a load node and the instances of account
// "shop", all stepped by hand in 1 ms steps.
type pair struct {
	t     *testing.T
	seqr  sequencer.SinkShell
	sink  *liveSink
	clock int64
	load  *Core
	loadO *outbox
	inst  []*member
	order int
	// what the load node was fed and what it sent, so far
	loadFed, loadTaken int
}

type member struct {
	c      *Core
	h      *stock
	out    *outbox
	fed    int
	taken  int
	paused bool
	dead   bool
}

const ms = int64(time.Millisecond)

func newPair(t *testing.T) *pair {
	scfg := sequencer.DefaultConfig()
	scfg.Session = 9
	scfg.RingBytes = 4 << 20
	scfg.ActiveTimeout = 40 * time.Millisecond
	p := &pair{t: t, sink: &liveSink{}, clock: 1_000 * ms}
	var err error
	if p.seqr, err = sequencer.NewSinkShell(scfg, p.sink); err != nil {
		t.Fatal(err)
	}
	lcfg := testConfig()
	lcfg.Account, lcfg.Rewind = "load", false
	lcfg.Window = 1024
	p.load, _, p.loadO = newTestCore(t, lcfg)
	p.addInstance(1)
	p.addInstance(2)
	return p
}

func (p *pair) addInstance(inst uint8) *member {
	cfg := testConfig()
	cfg.Account, cfg.Instance, cfg.HotHot = "shop", inst, true
	cfg.Incarnation = uint64(p.clock) + uint64(inst)
	cfg.HotHotHeartbeat = 10 * time.Millisecond
	cfg.Window = 64
	h := &stock{left: 300}
	o := &outbox{}
	c, err := NewCore(cfg, h, o)
	if err != nil {
		p.t.Fatal(err)
	}
	h.core = c
	m := &member{c: c, h: h, out: o}
	if int(inst) <= len(p.inst) {
		p.inst[inst-1] = m
	} else {
		p.inst = append(p.inst, m)
	}
	return m
}

func (p *pair) now() sequencer.Time { return sequencer.Time{Mono: p.clock, Wall: p.clock} }

// step advances 1 ms: the load sends orders, the sequencer ticks, every
// live node gets the packets published so far, and their frames go to the
// sequencer. Then it checks the stream (checkStream).
func (p *pair) step(orders int) {
	p.t.Helper()
	p.clock += ms
	for i := 0; i < orders; i++ {
		p.order++
		if _, err := p.load.Send(p.clock, []byte(fmt.Sprintf("o%d", p.order))); err != nil {
			p.t.Fatal(err)
		}
	}
	p.load.Flush(p.clock)
	p.seqr.Tick(p.now())
	step(p.t, p.load, p.clock, p.sink.frames[p.loadFed:]...)
	p.loadFed = len(p.sink.frames)
	p.load.Tick(p.clock)
	for _, m := range p.inst {
		if m.dead || m.paused {
			continue
		}
		for ; m.fed < len(p.sink.frames); m.fed++ {
			if err := m.c.Step(p.clock, p.sink.frames[m.fed]); err != nil {
				p.t.Fatalf("instance %d: %v", m.c.cfg.Instance, err)
			}
		}
		m.c.Tick(p.clock)
	}
	p.toSequencer(p.loadO, &p.loadTaken)
	for _, m := range p.inst {
		if !m.dead && !m.paused {
			p.toSequencer(m.out, &m.taken)
		}
	}
	p.seqr.Flush(p.now())
	p.checkStream(false)
}

func (p *pair) toSequencer(o *outbox, taken *int) {
	for ; *taken < len(o.frames); *taken++ {
		if k, _ := wire.PeekKind(o.frames[*taken]); k == wire.KindCommand {
			_ = p.seqr.Step(p.now(), o.frames[*taken], 1)
		}
	}
}

// checkStream replays the published stream: the shop's commands come
// only from the instance active at that point, each order is answered at
// most once (exactly once with all, at the end), and answers come in
// order of the orders.
func (p *pair) checkStream(all bool) (answers int) {
	p.t.Helper()
	active := -1
	answered := map[string]int{}
	orders := 0
	var pk wire.Packet
	var r wire.Record
	var x wire.Internal
	next := uint64(1)
	for _, f := range p.sink.frames {
		if wire.DecodePacket(f, &pk) != nil || pk.Kind != wire.KindData {
			continue
		}
		for pk.Next(&r) {
			if r.Seq != next {
				continue
			}
			next++
			switch {
			case r.Flags&wire.FlagInternal != 0:
				if wire.DecodeInternal(r.Payload, &x) != nil || x.Account != wire.MustAccount("shop") {
					continue
				}
				if x.Type == wire.InternalNodeActivated {
					active = int(x.Instance)
				} else if x.Type == wire.InternalNodeDeactivated && active == int(x.Instance) {
					active = -1
				}
			case r.Account == loadAcct:
				orders++
			case r.Account == wire.MustAccount("shop"):
				if int(r.Instance) != active {
					p.t.Fatalf("seq %d: shop/%d's command entered the stream while %d is active", r.Seq, r.Instance, active)
				}
				order := strings.Fields(string(r.Payload))[1]
				answered[order]++
				if answered[order] > 1 {
					p.t.Fatalf("seq %d: order %s answered twice", r.Seq, order)
				}
				answers++
			}
		}
	}
	if all && answers != orders {
		var missing []string
		for i := 1; i <= p.order; i++ {
			if answered[fmt.Sprintf("o%d", i)] == 0 {
				missing = append(missing, fmt.Sprintf("o%d", i))
			}
		}
		p.t.Fatalf("%d orders in the stream, %d answered; missing %v", orders, answers, missing)
	}
	return answers
}

func (p *pair) active() *member {
	for _, m := range p.inst {
		if !m.dead && m.c.Active() {
			return m
		}
	}
	return nil
}

// TestHotHot_PairSwitchesWithNothingLostOrDoubled runs a pair under load
// through a force-passive, a kill of the active (restarted from seq 1 as
// the new passive) and a pause of the active past the active-timeout
// (fenced when it resumes); after every step no order is answered twice
// nor by an instance that is not active, and at the end every order is
// answered once and both instances' digests agree.
func TestHotHot_PairSwitchesWithNothingLostOrDoubled(t *testing.T) {
	p := newPair(t)
	for i := 0; i < 50; i++ {
		p.step(3)
	}
	a := p.active()
	if a == nil {
		t.Fatal("no active instance after 50 ms")
	}
	// 1. Force-passive from the sequencer.
	if _, err := p.seqr.ForcePassive(p.now(), wire.MustAccount("shop"), a.c.cfg.Instance); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		p.step(3)
	}
	b := p.active()
	if b == nil || b == a {
		t.Fatalf("force-passive did not switch (active %v)", b)
	}
	if !slices.Equal(a.h.events, []string{"activated", "deactivated"}) && !slices.Equal(a.h.events, []string{"deactivated"}) {
		t.Fatalf("old active's events %v", a.h.events)
	}
	// 2. Kill the active; restart it (from seq 1) as a new incarnation.
	b.dead = true
	for i := 0; i < 100; i++ {
		p.step(3)
	}
	if c := p.active(); c != a {
		t.Fatalf("after the kill: active %v, want the partner", c)
	}
	nb := p.addInstance(b.c.cfg.Instance)
	for i := 0; i < 100; i++ {
		p.step(3)
	}
	if p.active() != a || nb.c.Active() {
		t.Fatal("the restarted instance is active")
	}
	// 3. Pause the active past the timeout, then resume it: it is fenced.
	a.paused = true
	for i := 0; i < 100; i++ {
		p.step(3)
	}
	if !nb.c.Active() || !a.c.Active() {
		t.Fatal("the pause did not switch (or the paused one heard of it)")
	}
	// It resumes and reads the packets it missed one at a time, each
	// frame it sends going out at once: it answers the orders it reads
	// before it reaches its deactivation, as the active it still thinks
	// it is, and those answers must be fenced.
	before := p.seqr.Stats().RejectedNotActive
	for a.c.Active() && a.fed < len(p.sink.frames) {
		if err := a.c.Step(p.clock, p.sink.frames[a.fed]); err != nil {
			t.Fatal(err)
		}
		a.fed++
		a.c.Flush(p.clock)
		p.toSequencer(a.out, &a.taken)
		p.seqr.Flush(p.now())
	}
	a.paused = false
	if p.seqr.Stats().RejectedNotActive == before {
		t.Fatal("the resumed stale active sent nothing, or its commands were not fenced")
	}
	for i := 0; i < 300; i++ {
		p.step(0)
	}
	p.checkStream(true)
	if a.c.Active() || !nb.c.Active() {
		t.Fatal("after the resume: both or neither active")
	}
	if ev := a.h.events; len(ev) == 0 || ev[len(ev)-1] != "deactivated" {
		t.Fatalf("the fenced instance's events %v, want OnDeactivated last", ev)
	}
	if a.h.applied != nb.h.applied || a.h.digest != nb.h.digest {
		t.Fatalf("instances diverged: %d/%x vs %d/%x", a.h.applied, a.h.digest, nb.h.applied, nb.h.digest)
	}
	for _, m := range []*member{a, nb} {
		if len(m.h.sendErr) > 0 || m.c.Err() != nil {
			t.Fatalf("instance %d: send errors %v, err %v", m.c.cfg.Instance, m.h.sendErr, m.c.Err())
		}
	}
	st := p.seqr.Stats()
	t.Logf("orders %d, switches %d, fenced %d, duplicate ids %d", p.order, st.ActivationSwitch, st.RejectedNotActive, st.RejectedDuplicateID)
}

// TestHotHot_SendOutsideTheStreamFails: a send on a hot-hot account that
// is not a reaction to a stream message fails, saying what to do.
func TestHotHot_SendOutsideTheStreamFails(t *testing.T) {
	cfg := testConfig()
	cfg.HotHot = true
	c, _, _ := newTestCore(t, cfg)
	_, err := c.Send(1, []byte("from a local timer"))
	if !errors.Is(err, ErrNotFromStream) || !strings.Contains(err.Error(), "through the stream") {
		t.Fatalf("Send outside a callback: %v", err)
	}
	if err := c.SendTimer(1, 1, 10, 0); !errors.Is(err, ErrHotHotTimer) {
		t.Fatalf("SendTimer: %v", err)
	}
}

// hotEcho sends one command per message it is handed.
type hotEcho struct {
	c   *Core
	err error
}

func (e *hotEcho) OnMessage(m *Message) {
	if _, err := e.c.Send(0, m.Payload); err != nil && e.err == nil {
		e.err = err
	}
}

// A passive hot-hot instance numbering its sends from the stream, keeping
// them as shadow entries and dropping them as the partner's copies come,
// allocates nothing per message once its backlog slots have grown.
func TestHotHot_PassiveSendAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.HotHot = true
	cfg.HotHotBacklog = 64
	e := &hotEcho{}
	c, err := NewCore(cfg, e, &nullOut{})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	f := newLiveFeed(t, 5, 64)
	run := func() {
		if err := f.step(c); err != nil {
			t.Fatal(err)
		}
		c.seen((f.next - 1) << 16) // the partner's copies arrived
	}
	for i := 0; i < 100; i++ {
		run()
	}
	if a := testing.AllocsPerRun(1000, run); a != 0 {
		t.Fatalf("%v allocs per 5 messages and 5 sends, want 0", a)
	}
	if e.err != nil || c.Stats().HotHotSends == 0 || c.Backlog() != 0 || c.Stats().ShadowDropped != c.Stats().HotHotSends {
		t.Fatalf("err %v, stats %+v, backlog %d", e.err, c.Stats(), c.Backlog())
	}
}
