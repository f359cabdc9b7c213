package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
)

// The epoch change is cluster/failover's core, the one the cluster member
// runs, driven here over simulated Raft and control paths: the failover
// state is an fsm.State the simulator applies commands to (a commit takes
// commitDelay), seal requests and answers travel with a seeded delay
// (longer to and from a slow member), a dead member refuses at once, and
// the core's Ready is acted on as the member's shell does: the seal
// recorded (restarted standbys seal it before they follow the stream),
// seals answered by standby.Agent.Seal after failover.CheckSeal, the
// catch-up by CatchUpFrom, the takeover by Standby.Takeover, and Start
// by a sequencer.NewPrimary of the epoch the core names.

// Timings of the simulated control path.
const (
	sealTimeout = 5 * time.Millisecond
	sealGrace   = 300 * time.Microsecond
	leadRetry   = time.Millisecond
	// maxElection bounds an epoch change while a majority is up: room
	// for a few failed attempts and a step-aside. It was 100 ms while a
	// running primary refused every seal and was no fetch source: with a
	// standby down for 30-60 ms and the next primary deposed from Raft
	// only or isolated, the one live standby was 1 of the 2 answers
	// needed, and seeds 37, 94, 106, 230 and 300 (-commands 2000) took
	// 7-8 leaderships. The running primary now answers for what it wrote
	// (DESIGN.md, "Any majority") and serves its own epoch to the
	// catch-up, and all five pass at 40 ms.
	maxElection = 40 * time.Millisecond
)

// delivery is an answer to the core, due at at; gen names the leadership
// it belongs to (a later one drops it).
type delivery struct {
	at  int64
	gen int
	msg failover.Msg
}

// commitDelay is a Raft commit's virtual time.
func (c *simCluster) commitDelay() int64 {
	return int64(100*time.Microsecond) + int64(c.w.rng.IntN(int(400*time.Microsecond)))
}

// netDelay is one control message's way to or from member i.
func (c *simCluster) netDelay(i int) int64 {
	d := int64(20*time.Microsecond) + int64(c.w.rng.IntN(int(200*time.Microsecond)))
	if c.w.now < c.m[i].slowTill {
		d += int64(sealGrace) + int64(c.w.rng.IntN(int(3*time.Millisecond)))
	}
	return d
}

func (c *simCluster) deliver(after int64, m failover.Msg) {
	c.inbox = append(c.inbox, delivery{at: c.w.now + after, gen: c.gen, msg: m})
}

// applyFSM applies cmd to the simulated failover state.
func (c *simCluster) applyFSM(cmd fsm.Command) (*fsm.State, error) {
	c.findex++
	st, err := c.fst.Apply(c.findex, cmd)
	c.fst = st
	return st, err
}

// beginElection makes a live member the Raft leader (seeded), with a new
// core on the failover state; false while fewer than a Raft majority
// runs (no leader can be elected).
func (c *simCluster) beginElection() bool {
	w := c.w
	var cands, up []int
	for i, m := range c.m {
		if !m.dead && m.sb != nil {
			up = append(up, i)
			if i != c.primary {
				cands = append(cands, i)
			}
		}
	}
	if len(up) < members/2+1 {
		return false
	}
	leader, ok := c.elect.elect(cands)
	if !ok {
		return false
	}
	cfg := failover.DefaultConfig()
	cfg.Self = c.m[leader].id
	cfg.SealTimeoutNS, cfg.GraceNS, cfg.RetryNS = int64(sealTimeout), int64(sealGrace), int64(leadRetry)
	ch, err := failover.New(cfg, c.fst, w.now)
	if err != nil {
		w.fail("failover core: %v", err)
		return false
	}
	c.ch, c.leader, c.taken = ch, leader, nil
	c.gen++
	c.elections++
	c.electionFault = w.rng.IntN(3)
	c.restartAt = 0
	c.faultAt = w.now + int64(w.rng.IntN(int(2*time.Millisecond)))
	if debug {
		fmt.Printf("t=%v leader m%d epoch=%d primary=%d\n", time.Duration(w.now), c.m[leader].id, c.fst.Epoch(), c.fst.Primary())
	}
	return true
}

// endElection drops the leadership (the leader died or stepped aside):
// the next election in an election timeout.
func (c *simCluster) endElection() {
	if c.taken != nil {
		// The leader took its standby over but began no epoch: a new
		// standby on the same store, as the member's shell opens one.
		c.reopen(c.m[c.leader])
	}
	c.endCore()
	c.ch, c.taken = nil, nil
	c.gen++
	c.electAt = c.w.now + int64(time.Millisecond)*int64(1+c.w.rng.IntN(3))
}

// reopen closes a member's standby (or taken-over store) and opens a new
// one on its directory.
func (c *simCluster) reopen(m *member) {
	if m.dead {
		return
	}
	if m.sb != nil {
		_ = m.sb.Close()
		m.sb = nil
	}
	c.restarts++
	if err := c.startStandby(m); err != nil {
		c.w.fail("%v", err)
	}
}

// election runs the epoch change one step: start it when due, hand the
// core its due answers and time, and act on its Ready.
func (c *simCluster) election() {
	w := c.w
	// Any majority serves (DESIGN.md): with a majority of the members up
	// the whole time, an epoch begins within maxElection.
	up := 0
	for _, m := range c.m {
		if !m.dead && m.sb != nil {
			up++
		}
	}
	switch {
	case up < members/2+1 || w.now < w.idleUntil:
		// (Idle hours step a second at a time.)
		c.majoritySince = 0
	case c.majoritySince == 0:
		c.majoritySince = w.now
	case w.now-c.majoritySince > int64(maxElection):
		w.fail("no epoch began in %v with %d of %d members up (epoch %d, %d leaderships)", maxElection, up, members, w.epoch, c.elections)
		return
	}
	if c.ch == nil {
		if w.now >= c.electAt && !c.beginElection() {
			c.electAt = w.now + int64(time.Millisecond)
		}
		if c.ch == nil {
			return
		}
	}
	if c.m[c.leader].dead {
		if debug {
			fmt.Printf("t=%v leader m%d died\n", time.Duration(w.now), c.m[c.leader].id)
		}
		c.taken = nil // its store went with it
		c.endElection()
		return
	}
	c.electionFaults()
	keep := c.inbox[:0]
	var due []delivery
	for _, d := range c.inbox {
		switch {
		case d.gen != c.gen:
		case d.at <= w.now:
			due = append(due, d)
		default:
			keep = append(keep, d)
		}
	}
	c.inbox = keep
	for _, d := range due {
		c.ch.Step(w.now, d.msg)
		if !c.act() {
			return
		}
	}
	c.ch.Tick(w.now)
	c.act()
}

// act does what the core asks, as the member's shell does; false when
// the leadership ended.
func (c *simCluster) act() bool {
	w := c.w
	for {
		rd := c.ch.Ready()
		if rd.Empty() {
			return true
		}
		if rd.Failed != nil {
			if debug {
				fmt.Printf("t=%v epoch change failed: %v\n", time.Duration(w.now), rd.Failed)
			}
			if c.taken != nil {
				c.reopen(c.m[c.leader])
				c.taken = nil
			}
		}
		if rd.StepAside {
			c.endElection()
			return false
		}
		if rd.Barrier {
			c.deliver(c.commitDelay(), failover.Committed{State: c.fst})
		}
		if rd.Propose != nil {
			// Applied now, answered after a commit's delay (a newer
			// state may be committed meanwhile by nobody else: one
			// leader at a time here).
			if st, err := c.applyFSM(rd.Propose); err != nil {
				c.deliver(c.commitDelay(), failover.Rejected{Err: err, Refused: true})
			} else {
				c.deliver(c.commitDelay(), failover.Committed{State: st})
			}
		}
		if e := rd.RecordSeal; e != 0 {
			// Recorded in the failover state: a standby (re)started from
			// now on seals it before it follows the stream.
			c.sealed = max(c.sealed, e)
			if _, err := c.applyFSM(fsm.SealEpoch{Epoch: e}); err != nil {
				c.deliver(c.commitDelay(), failover.Rejected{Err: err, Refused: true})
			} else {
				c.deliver(c.commitDelay(), failover.SealRecorded{Epoch: e})
			}
		}
		for _, s := range rd.Seal {
			c.seal(s)
		}
		if f := rd.Fetch; f != nil {
			c.fetch(f)
		}
		if t := rd.TakeOver; t != nil {
			c.takeOver(t)
		}
		if s := rd.Start; s != nil {
			c.start(s)
			return false
		}
	}
}

// seal answers a seal request at the member, as its control endpoint
// does: refused when dead (at once), when its standby is not running (a
// between roles) or when the failover state has not reached the epoch;
// the running primary answers for what it wrote.
func (c *simCluster) seal(s failover.Seal) {
	w := c.w
	i := int(s.To.ID - 1)
	m := c.m[i]
	if !m.dead && i == c.primary {
		// The primary, deposed from Raft or cut off from its standbys,
		// runs on: it answers for what its store wrote and counts no more
		// toward stable, as the member's primarySelf does (its standby
		// was taken over and refuses).
		if err := failover.CheckSeal(c.fst, s.Epoch); err != nil || s.Epoch < uint64(w.epoch) {
			if err == nil {
				err = fmt.Errorf("seal of epoch %d, sequencing %d", s.Epoch, w.epoch)
			}
			c.deliver(2*c.netDelay(i), failover.SealReply{From: m.id, Epoch: s.Epoch, Err: err})
			return
		}
		if !c.selfSealed {
			c.selfSealed, c.frozen = true, c.selfPosition()
		}
		got := c.frozen
		if debug {
			fmt.Printf("t=%v seal running primary m%d epoch %d: %d (stable %d)\n", time.Duration(w.now), m.id, s.Epoch, got, w.seq.Stable())
		}
		c.deliver(2*c.netDelay(i), failover.SealReply{From: m.id, Epoch: s.Epoch, Contiguous: got, HeldEpoch: uint64(w.epoch), LastStamp: w.stampAt(got)})
		return
	}
	if m.dead || m.sb == nil {
		c.deliver(c.netDelay(i), failover.SealReply{From: m.id, Epoch: s.Epoch, Err: errors.New("connection refused")})
		return
	}
	if err := failover.CheckSeal(c.fst, s.Epoch); err != nil {
		c.deliver(2*c.netDelay(i), failover.SealReply{From: m.id, Epoch: s.Epoch, Err: err})
		return
	}
	got, err := m.sb.Seal(uint32(s.Epoch))
	if err == nil && c.electionFault == 0 && i != c.leader && c.restartAt == 0 {
		// This member restarts right after its answer, before the
		// commit (issue 14 item 7).
		c.restartAt, c.restartM = w.now+int64(c.netDelay(i)), i
	}
	r := failover.SealReply{From: m.id, Epoch: s.Epoch, Contiguous: got, Err: err}
	if err == nil {
		r.HeldEpoch = uint64(m.sb.HeldEpoch())
		r.LastStamp = w.stampAt(got)
	}
	if debug {
		fmt.Printf("t=%v seal m%d epoch %d: %d held=%d err=%v (stable %d)\n", time.Duration(w.now), m.id, s.Epoch, got, r.HeldEpoch, err, w.seq.Stable())
	}
	c.deliver(2*c.netDelay(i), r)
}

// stampAt is the time of seq in the stream (0: none yet); records cut
// from the log keep theirs in the cut tables.
func (w *world) stampAt(seq uint64) int64 {
	if seq == 0 {
		return 0
	}
	if seq <= uint64(len(w.log)) {
		return w.log[seq-1].time
	}
	var t int64
	for _, cu := range w.cuts {
		if seq > cu.last && seq-cu.last <= uint64(len(cu.lost)) {
			t = max(t, cu.lost[seq-cu.last-1].time)
		}
	}
	return t
}

func (c *simCluster) fetch(f *failover.Fetch) {
	lm := c.m[c.leader]
	var srcs []standby.Source
	for _, p := range f.Peers {
		if m := c.m[p.ID-1]; !m.dead && m.sb != nil {
			srcs = append(srcs, m.sb)
		}
	}
	err := lm.sb.CatchUpFrom(f.Cut, srcs...)
	c.deliver(int64(50*time.Microsecond), failover.Fetched{Held: lm.sb.Contiguous(), Err: err})
}

func (c *simCluster) takeOver(t *failover.TakeOver) {
	w := c.w
	lm := c.m[c.leader]
	tk, err := lm.sb.Takeover(t.Cut)
	if err == nil && t.Cut > 0 {
		// The standby's State at the cut must be the stream's.
		want, werr := w.stateAt(t.Cut)
		if werr != nil {
			w.fail("epoch change at %d: %v", t.Cut, werr)
			return
		}
		if string(want.Snapshot()) != string(tk.State.Snapshot()) {
			w.fail("leader %d: its State at cut %d differs from the stream's", lm.id, t.Cut)
			return
		}
	}
	if err == nil {
		c.taken = &tk
		_ = lm.client.Close()
		lm.client, lm.onFrame = nil, nil
	}
	c.deliver(int64(20*time.Microsecond), failover.TookOver{Err: err})
}

// start makes the leader the primary of the epoch the core committed.
func (c *simCluster) start(s *failover.Start) {
	w := c.w
	lm := c.m[c.leader]
	cut := s.FirstSeq - 1
	if uint32(s.Epoch) != w.epoch+1 {
		w.fail("the core started epoch %d after epoch %d", s.Epoch, w.epoch)
		return
	}
	if stable := w.seq.Stable(); cut < stable {
		w.fail("epoch %d starts at %d, below stable %d of epoch %d", s.Epoch, s.FirstSeq, stable, w.epoch)
		return
	}
	if cut > uint64(len(w.log)) {
		w.fail("epoch %d starts at %d, past the last seq published (%d)", s.Epoch, s.FirstSeq, len(w.log))
		return
	}
	t := *c.taken
	for _, cu := range w.cuts {
		t.Cuts = append(t.Cuts, sequencer.EpochCut{Epoch: cu.epoch, Last: cu.last})
	}
	cfg := w.sc
	cfg.Epoch = uint32(s.Epoch)
	cfg.FirstSeq = s.FirstSeq
	cfg.StartTime = s.StartTime
	var seq sequencer.SinkShell
	var err error
	if cut == 0 {
		seq, err = sequencer.NewSinkShell(cfg, w)
	} else {
		seq, err = sequencer.NewPrimarySinkShell(cfg, w, t)
	}
	if err != nil {
		w.fail("epoch change at %d: %v", cut, err)
		return
	}
	if debug {
		fmt.Printf("t=%v primary m%d epoch %d from %d (stable was %d, published %d)\n", time.Duration(w.now), lm.id, s.Epoch, s.FirstSeq, w.seq.Stable(), w.seq.Published())
	}
	old := c.primary
	w.startEpoch(seq, cfg.Epoch, cut)
	if err := c.checkCheckpoints(); err != nil {
		w.fail("epoch %d from %d: %v", cfg.Epoch, s.FirstSeq, err)
		return
	}
	c.primary, c.isolated, c.deposing, c.own = c.leader, false, false, t.History
	c.selfSealed, c.frozen = false, 0
	c.changes++
	if c.span != nil && c.changes < c.spanTill {
		// The node cut off across two epoch changes: the next follows.
		c.quickAt = w.now + int64(2*time.Millisecond) + int64(w.rng.IntN(int(6*time.Millisecond)))
	}
	c.acks = cluster.NewQuorumAcks(cluster.Epoch{Session: s.Session, Epoch: w.epoch, FirstSeq: s.FirstSeq, Members: s.Voters, Self: lm.id})
	c.endCore()
	c.ch, c.taken = nil, nil
	c.gen++
	c.majoritySince = 0
	for _, m := range c.m {
		if m.cutOff && m.healAt <= w.now {
			w.net.Partition(m.peer, false)
			m.cutOff = false
		}
	}
	if old >= 0 && old != c.leader {
		// The deposed primary stops at once and comes back as a
		// standby on its store (a new follower, as the member does).
		c.reopen(c.m[old])
	}
}

// electionFaults are the faults aimed at an epoch change in progress,
// one kind per election (seeded): a member other than the leader
// restarted right after its seal answer, before the commit (seal arms
// it); a slow member whose answer misses the grace; or none.
func (c *simCluster) electionFaults() {
	w := c.w
	if c.restartAt != 0 && w.now >= c.restartAt {
		c.restartAt = 0
		if m := c.m[c.restartM]; !m.dead && c.restartM != c.primary {
			if debug {
				fmt.Printf("t=%v restart m%d after its seal answer\n", time.Duration(w.now), m.id)
			}
			c.kill(m, int64(50*time.Microsecond)+int64(w.rng.IntN(int(150*time.Microsecond))))
			c.standbyFs++
		}
	}
	if c.faultAt == 0 || w.now < c.faultAt {
		return
	}
	c.faultAt = 0
	var others []int
	for i, m := range c.m {
		if i != c.leader && i != c.primary && !m.dead && m.sb != nil {
			others = append(others, i)
		}
	}
	if len(others) == 0 {
		return
	}
	m := c.m[others[w.rng.IntN(len(others))]]
	switch c.electionFault {
	case 1:
		m.slowTill = w.now + int64(10*time.Millisecond)
		c.standbyFs++
	}
}

// endCore counts what the ending core did that the run reports.
func (c *simCluster) endCore() {
	if c.ch != nil && c.ckpt != nil {
		c.ckpt.dropped += c.ch.Stats().Dropped
	}
}
