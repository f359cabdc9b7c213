package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// The epoch change is cluster/failover's core, the one the simulator
// drives too; this file is its shell on the member: Raft operations for
// the core's Barrier and proposals (one at a time, on the lead
// goroutine), the seal recorded in Raft (fsm.SealEpoch), seals to every
// voter over the peer port (this member's own answered in process), the
// catch-up through the standby, the takeover of its State and store, and
// the sequencing that follows Start.

// catchUpTimeoutFactor bounds a new primary's catch-up, in seal timeouts
// (10 s with the LAN profile): room for fetching a lagging standby's
// backlog, not for waiting forever on peers that do not have it.
const catchUpTimeoutFactor = 20

// maxLeadFailures is how many failed epoch changes in a row make a leader
// hand the leadership to another member.
const maxLeadFailures = 3

// lead runs while this member is the Raft leader: it changes the epoch
// (the core retries a failed attempt after a heartbeat and asks to step
// aside after maxLeadFailures) and sequences.
func (n *Member) lead(ctx context.Context) {
	defer n.setRole(RoleStandby)
	for ctx.Err() == nil && n.IsLeader() && !n.handover.Load() {
		err := n.leadOnce(ctx)
		if ctx.Err() != nil || errors.Is(err, errNotLeader) || n.handover.Load() {
			return
		}
		n.log.Warn("primary ended; changing the epoch again while leader", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(n.cfg.Timeouts.Heartbeat):
		}
	}
}

// failoverConfig is the core's configuration for this member.
func (n *Member) failoverConfig() failover.Config {
	cfg := failover.DefaultConfig()
	cfg.Self = n.cfg.ID
	if !n.cfg.Join {
		cfg.Bootstrap = n.cfg.Members
	}
	cfg.SealTimeoutNS = int64(n.cfg.Timeouts.Seal)
	cfg.GraceNS = min(int64(n.cfg.Timeouts.Commit), cfg.SealTimeoutNS)
	cfg.RetryNS = int64(n.cfg.Timeouts.Heartbeat)
	cfg.MaxFailures = maxLeadFailures
	return cfg
}

// leadShell is one leadership's epoch change: the core and what the
// shell holds between its steps.
type leadShell struct {
	n       *Member
	ctx     context.Context
	ch      *failover.Change
	replies chan failover.SealReply
	t0      time.Time
	chg     *ops.Change
	st      *fsm.State // the state the takeover was built on
	// Set by the takeover, used by Start; released when an attempt fails.
	taken *primaryParts
}

// primaryParts are what a takeover readied for sequencing.
type primaryParts struct {
	f    Follower // stopped; its store is the primary's history
	core *sequencer.Core
	out  teeSink
	hist sequencer.RetransmitStore
	srv  interface{ Close() error }
}

func (p *primaryParts) close() {
	p.srv.Close()
	if c, ok := p.f.(io.Closer); ok {
		c.Close()
	}
}

func (n *Member) mono() int64 { return n.deps.Clock().Mono }

// leadOnce drives one failover.Change from this member's failover state
// to Start, then sequences until the primacy ends (DESIGN.md "Stability
// and failover", cluster/failover's doc for the decisions).
//
// The first attempt skips the Barrier: a new leader has almost always
// applied every committed entry already, and every command it proposes is
// a compare-and-set the FSM checks at apply time, so a proposal built on
// a stale state is refused, never applied wrong; the core then retries
// through a Barrier. This saves one commit (a replicated fsync).
func (n *Member) leadOnce(ctx context.Context) error {
	n.setRole(RoleSealing)
	// A previous leadership may have stopped the standby to take it over.
	if err := n.fr.start(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	ch, err := failover.New(n.failoverConfig(), n.fsm.State(), n.mono())
	if err != nil {
		return err
	}
	s := &leadShell{n: n, ctx: ctx, ch: ch, replies: make(chan failover.SealReply, fsm.MaxMembers), t0: t0,
		chg: &ops.Change{LeaderAtNS: t0.UnixNano()}}
	defer func() {
		if s.taken != nil {
			s.release()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		rd := ch.Ready()
		if !rd.Empty() {
			start, err := s.act(rd)
			if err != nil {
				return err
			}
			if start != nil {
				return s.sequence(start)
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n.handover.Load() || !n.IsLeader() {
			return errNotLeader
		}
		wait := time.Hour
		if due := ch.NextDue(); due != 0 {
			wait = max(time.Duration(due-n.mono()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-s.replies:
			ch.Step(n.mono(), r)
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		ch.Tick(n.mono())
	}
}

// release undoes a takeover whose epoch did not begin: the stream server
// and the store close, and a new standby opens on the directory.
func (s *leadShell) release() {
	s.taken.close()
	s.taken = nil
	if err := s.n.fr.start(s.ctx); err != nil {
		s.n.log.Warn("reopen the standby after a failed epoch change", "err", err)
	}
}

// act does what rd asks, in Ready's order, stepping the core with each
// answer; it returns the Start once the epoch is committed, or an error
// that ends the leadership (lost, or ctx ended).
func (s *leadShell) act(rd failover.Ready) (*failover.Start, error) {
	n, ch := s.n, s.ch
	if rd.Failed != nil {
		n.log.Warn("epoch change failed; retrying while leader", "err", rd.Failed)
		if s.taken != nil {
			s.release()
		}
	}
	if rd.StepAside {
		// A leader that cannot become primary (its standby cannot take
		// over, the stream will not open, no quorum answers it) would
		// hold the group without a primary: let another member try.
		n.log.Warn("handing the raft leadership over after failed epoch changes", "failures", maxLeadFailures)
		terr := n.raft.LeadershipTransfer().Error()
		if terr == nil && !n.IsLeader() {
			return nil, errNotLeader
		}
		n.log.Warn("leadership transfer did not happen; still leader", "err", terr)
	}
	if rd.Barrier {
		if err := n.raft.Barrier(n.cfg.Timeouts.Seal).Error(); err != nil {
			err = n.raftErr("barrier", err)
			if errors.Is(err, errNotLeader) {
				return nil, err
			}
			ch.Step(n.mono(), failover.Rejected{Err: err})
		} else {
			s.chg.BarrierUS = time.Since(s.t0).Microseconds()
			ch.Step(n.mono(), failover.Committed{State: n.fsm.State()})
		}
	}
	if rd.Propose != nil {
		cmd := rd.Propose
		if ns, ok := cmd.(fsm.NewSession); ok && ns.ID == 0 {
			// The session id is drawn here, at bootstrap (issue 14
			// item 10): no two clusters share one.
			ns.ID = NewSessionID(ns.Prev, n.deps.Clock().Wall)
			cmd = ns
		}
		if d, ok := cmd.(fsm.DropCheckpoints); ok {
			cp, _ := n.fsm.State().LastCheckpoint()
			n.log.Error("a checkpoint is above what every member that answered the seal holds: dropping it so that the epoch can begin (forged standby acks, or writes lost to a power cut; nodes that delivered past the cut will stop diverged)",
				"epoch", d.Epoch, "cut", d.Above, "checkpoint", cp.Seq)
		}
		st, err := n.apply(cmd)
		switch {
		case errors.Is(err, errNotLeader):
			return nil, err
		case err != nil:
			ch.Step(n.mono(), failover.Rejected{Err: err, Refused: errors.Is(err, errRejected)})
		default:
			if _, ok := cmd.(fsm.BeginEpoch); ok {
				s.chg.CommitUS = time.Since(s.t0).Microseconds()
			}
			ch.Step(n.mono(), failover.Committed{State: st})
		}
	}
	if e := rd.RecordSeal; e != 0 {
		// Recorded in Raft before any member is asked: a member that
		// opens its standby seals the recorded epoch before it follows
		// the stream (followers.start), so one restarted between its
		// answer and the commit acks the sealed epoch no more.
		_, err := n.apply(fsm.SealEpoch{Epoch: e})
		switch {
		case errors.Is(err, errNotLeader):
			return nil, err
		case err != nil:
			ch.Step(n.mono(), failover.Rejected{Err: err, Refused: errors.Is(err, errRejected)})
		default:
			ch.Step(n.mono(), failover.SealRecorded{Epoch: e})
		}
	}
	if len(rd.Seal) > 0 {
		n.requestSeals(s.ctx, rd.Seal, s.replies)
	}
	if f := rd.Fetch; f != nil {
		s.chg.SealUS = time.Since(s.t0).Microseconds()
		ch.Step(n.mono(), s.fetch(f))
		s.chg.CatchUpUS = time.Since(s.t0).Microseconds()
	}
	if t := rd.TakeOver; t != nil {
		if s.chg.SealUS == 0 {
			s.chg.SealUS = time.Since(s.t0).Microseconds()
			s.chg.CatchUpUS = s.chg.SealUS
		}
		err := s.takeOver(t)
		if err != nil && errors.Is(err, errFatal) {
			return nil, err
		}
		ch.Step(n.mono(), failover.TookOver{Err: err})
	}
	return rd.Start, nil
}

// requestSeals sends each seal (this member's own in process, the
// others' over their peer ports) on a goroutine of its own, each answer
// to replies (dropped when it is full: replies holds fsm.MaxMembers, more
// than one attempt's voters); every request ends within the seal timeout.
func (n *Member) requestSeals(ctx context.Context, seals []failover.Seal, replies chan<- failover.SealReply) {
	for _, sl := range seals {
		go func() {
			var r wire.PeerSealReply
			var err error
			if sl.To.ID == n.cfg.ID {
				r, err = n.Seal(uint32(sl.Epoch))
			} else if sl.To.StreamAddr == "" {
				err = fmt.Errorf("%w: member %d has no peer address", ErrSealRefused, sl.To.ID)
			} else {
				sctx, cancel := context.WithTimeout(ctx, n.cfg.Timeouts.Seal)
				r, err = n.peers.RequestSeal(sctx, sl.To.StreamAddr, uint32(sl.Epoch))
				cancel()
			}
			a := failover.SealReply{From: sl.To.ID, Epoch: sl.Epoch, Contiguous: r.Contiguous, HeldEpoch: uint64(r.HeldEpoch), LastStamp: r.LastStamp, Err: err}
			select {
			case replies <- a:
			default:
				// The core no longer reads (it started, or the attempt's
				// answers filled the buffer: a late answer of an ended
				// attempt never counts).
			}
		}()
	}
}

// fetch brings the standby up to the cut from the peers the core names.
func (s *leadShell) fetch(f *failover.Fetch) failover.Fetched {
	n := s.n
	fol := n.fr.get()
	if fol == nil {
		return failover.Fetched{Err: errNotFollowing}
	}
	peers := make([]string, 0, len(f.Peers))
	for _, m := range f.Peers {
		if m.StreamAddr != "" {
			peers = append(peers, m.StreamAddr)
		}
	}
	cctx, cancel := context.WithTimeout(s.ctx, catchUpTimeoutFactor*n.cfg.Timeouts.Seal)
	err := fol.CatchUp(cctx, f.Cut, peers)
	cancel()
	return failover.Fetched{Held: fol.Contiguous(), Err: err}
}

// errFatal marks a takeover error that must stop the member (a store of
// another session), not only the attempt.
var errFatal = errors.New("cluster: fatal")

// takeOver stops the standby and readies the primary of t.Epoch at
// t.Cut+1: its State and store, the stream server, the Core. Only then
// does the core propose BeginEpoch: a member that cannot take over burns
// no epoch.
func (s *leadShell) takeOver(t *failover.TakeOver) error {
	n := s.n
	st := n.fsm.State()
	cut := t.Cut
	if t.Epoch > uint64(^uint32(0)) {
		return fmt.Errorf("%w: epoch %d does not fit the stream's 32 bits", fsm.ErrSeqOverflow, t.Epoch)
	}
	f := n.fr.stop()
	if f == nil {
		return errNotFollowing
	}
	closeF := func() {
		if c, ok := f.(io.Closer); ok {
			c.Close()
		}
	}
	// A store of another session must not become this session's
	// history. The standby checks it as it follows; a member that leads
	// before its standby saw the session (the bootstrap leader) checks it
	// here, and stops as the standby would.
	if _, err := checkSession(f, st); err != nil {
		closeF()
		select {
		case n.fr.errc <- err:
		default:
		}
		return fmt.Errorf("%w: %w", errFatal, err)
	}
	fail := func(err error) error {
		closeF()
		if serr := n.fr.start(s.ctx); serr != nil {
			n.log.Warn("reopen the standby", "err", serr)
		}
		return err
	}
	// The standby's store becomes the primary's history, and the primary
	// writes what it publishes into it too (teeSink), and counts toward
	// stable only what the store wrote (selfWritten): after a restart
	// the store holds all it counted, so its seal answer counts like a
	// standby's. At cut 0 the State is not needed (a fresh session), the
	// store is.
	tk, err := f.Takeover(cut)
	switch {
	case err != nil && cut > 0:
		return fail(fmt.Errorf("cluster: take over at %d: %w", cut, err))
	case err != nil:
		n.log.Warn("no store to write the new session to", "err", err)
		tk = sequencer.Takeover{}
	}
	// The earlier epochs' cuts: a history packet is stamped no higher
	// than its own epoch's (the store may not know them all).
	for _, c := range st.Cuts() {
		if c.Session == st.Session() && c.Epoch <= uint64(^uint32(0)) {
			tk.Cuts = append(tk.Cuts, sequencer.EpochCut{Epoch: uint32(c.Epoch), Last: c.Last})
		}
	}
	s.chg.TakeoverUS = time.Since(s.t0).Microseconds()
	srv, err := n.deps.Stream()
	if err != nil {
		return fail(fmt.Errorf("cluster: open the stream: %w", err))
	}
	cfg := n.cfg.Sequencer
	cfg.Session, cfg.Epoch, cfg.FirstSeq, cfg.Standalone = st.Session(), uint32(t.Epoch), cut+1, false
	// The core's floor counts every counted seal answer's last stamp
	// (another member may have seen a later heartbeat of the old primary
	// than this one's standby).
	cfg.StartTime = max(cfg.StartTime, clockFloor(st, f), t.StartTime)
	// The epoch's first records (session start, epoch start) are stamped
	// now, as a standalone sequencer's are (sequencer.NewAgent), not at
	// the clock's epoch: a cluster's session started in 1970.
	cfg.StartTime = max(cfg.StartTime, n.deps.Clock().Wall)
	var core *sequencer.Core
	if cut == 0 {
		core, err = sequencer.New(cfg)
	} else {
		core, err = sequencer.NewPrimary(cfg, tk)
	}
	if err != nil {
		srv.Close()
		return fail(fmt.Errorf("cluster: primary of epoch %d at %d: %w", t.Epoch, cut+1, err))
	}
	s.taken = &primaryParts{f: f, core: core, out: newTeeSink(core, srv, tk.History), hist: tk.History, srv: srv}
	s.st = st
	s.chg.OpenUS = time.Since(s.t0).Microseconds()
	return nil
}

// stamper is a Follower that knows the newest sequencer time it saw
// (standby.Agent.LastStamp: heartbeats included).
type stamper interface{ LastStamp() int64 }

// clockFloor is the earliest clock a new primary may start at: the last
// checkpoint's time and the newest time its standby saw, the old
// primary's last heartbeat included (a live node's Now() follows
// heartbeats: a new epoch stamped below the last one would take it back;
// issue 14 item 13). The records up to the cut count too, through the
// taken-over State (sequencer.NewPrimary).
func clockFloor(st *fsm.State, f Follower) int64 {
	var t int64
	if cp, ok := st.LastCheckpoint(); ok {
		t = cp.UnixNano
	}
	if s, ok := f.(stamper); ok {
		t = max(t, s.LastStamp())
	}
	return t
}

// sequence starts the primary the core committed and runs it until the
// primacy ends.
func (s *leadShell) sequence(start *failover.Start) error {
	n := s.n
	p := s.taken
	s.taken = nil // sequence owns it now
	defer p.close()
	s.chg.Epoch, s.chg.Cut = start.Epoch, start.FirstSeq-1
	if s.chg.CommitUS == 0 {
		s.chg.CommitUS = time.Since(s.t0).Microseconds()
	}
	acks := n.deps.Acks(Epoch{Session: start.Session, Epoch: uint32(start.Epoch), FirstSeq: start.FirstSeq, Members: start.Voters, Self: n.cfg.ID})
	return n.sequence(s.ctx, p.core, p.out, p.hist, acks, s.chg, s.t0)
}
