package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/fsm"
)

// followers runs the member's standby, one at a time: from start until a
// lead stops it to take over its store, and again (a new one on the same
// directory) when the primacy ends. A follower that fails by itself
// reports on errc, and the Member's Run returns the error: a member that
// cannot follow the stream must not stay in the group looking healthy.
type followers struct {
	n    *Member
	errc chan error
	// mu guards the fields below. Lock order: mu, then the follower's
	// own lock (start and tell call KnowEpoch under mu, so no epoch start
	// reaches a follower after stop took it for its Takeover).
	mu     sync.Mutex
	cur    Follower
	cancel context.CancelFunc
	done   chan struct{}
	told   uint64 // the newest epoch cur was told the start of
	// checked is the session cur's store was checked against (0: none
	// yet: the failover state had no session).
	checked uint64
	// sealed is the recorded seal cur was sealed for (sealRecorded).
	sealed uint64
}

// sealRecorded seals f for the epoch a new leader recorded as sealed
// (fsm.SealEpoch), when that is the current epoch of st (its epoch
// change is under way): a member (re)started between its seal answer and
// the next epoch's commit then acks nothing more of the sealed epoch, so
// stable cannot pass the cut (issue 14 item 7). A seal the standby
// refuses because it sealed a later epoch already is no error.
func sealRecorded(f Follower, st *fsm.State) error {
	e := st.Sealed()
	if e == 0 || e != st.Epoch() || e > uint64(^uint32(0)) {
		return nil
	}
	if _, err := f.Seal(uint32(e)); err != nil && !errors.Is(err, standby.ErrSealed) {
		return fmt.Errorf("cluster: seal the standby for the recorded epoch %d: %w", e, err)
	}
	return nil
}

// sessionChecker is a Follower whose store belongs to one session (the
// standby: standby.Agent.CheckSession).
type sessionChecker interface {
	CheckSession(session uint64) error
}

// checkSession refuses a follower whose store holds another session than
// st's, the cluster's: a directory of another cluster (every cluster was
// session 1 once, and such a store took this cluster's stream in
// silence). It returns the session checked (0: st has none yet).
func checkSession(f Follower, st *fsm.State) (uint64, error) {
	c, ok := f.(sessionChecker)
	if !ok || st.Session() == 0 {
		return 0, nil
	}
	if err := c.CheckSession(st.Session()); err != nil {
		return 0, fmt.Errorf("cluster: the failover state names session %d: %w", st.Session(), err)
	}
	return st.Session(), nil
}

func newFollowers(n *Member) *followers {
	return &followers{n: n, errc: make(chan error, 1)}
}

// get returns the running follower, or nil while the member is primary.
func (fr *followers) get() Follower {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.cur
}

// start opens and runs a follower unless one runs.
func (fr *followers) start(ctx context.Context) error {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.cur != nil {
		return nil
	}
	f, err := fr.n.deps.NewFollower()
	if err != nil {
		return fmt.Errorf("cluster: open the standby: %w", err)
	}
	st := fr.n.fsm.State()
	checked, err := checkSession(f, st)
	if err != nil {
		if c, ok := f.(io.Closer); ok {
			c.Close()
		}
		return err
	}
	fr.checked = checked
	knowEpochs(f, st, 0)
	fr.told = st.Epoch()
	if err := sealRecorded(f, st); err != nil {
		// A standby that cannot seal has failed; its Run says so.
		fr.n.log.Warn("recorded seal", "err", err)
	}
	fr.sealed = st.Sealed()
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	fr.cur, fr.cancel, fr.done = f, cancel, done
	go func() {
		defer close(done)
		if err := f.Run(fctx); err != nil && fctx.Err() == nil {
			select {
			case fr.errc <- fmt.Errorf("cluster: standby: %w", err):
			default:
			}
		}
	}()
	return nil
}

// stop ends the running follower and returns it (nil when none ran), for
// its Takeover.
func (fr *followers) stop() Follower {
	fr.mu.Lock()
	f, cancel, done := fr.cur, fr.cancel, fr.done
	fr.cur, fr.cancel, fr.done = nil, nil, nil
	fr.mu.Unlock()
	if f != nil {
		cancel()
		if w, ok := f.(interface{ Wake() }); ok {
			// A standby blocked in Poll (up to its keepalive) sees the
			// cancellation at once: the new primary waits for it.
			w.Wake()
		}
		<-done
	}
	return f
}

// errNotFollowing: a seal reached a member that runs no standby (it is
// primary, or between roles).
var errNotFollowing = errors.New("cluster: this member runs no standby now (it is primary)")

// seal seals this member's standby and returns what it holds and the
// epoch of its newest held record (0 when the follower cannot tell).
func (fr *followers) seal(epoch uint32) (c uint64, held uint32, stamp int64, err error) {
	f := fr.get()
	if f == nil {
		return 0, 0, 0, errNotFollowing
	}
	if c, err = f.Seal(epoch); err != nil {
		return 0, 0, 0, err
	}
	if s, ok := f.(stamper); ok {
		stamp = s.LastStamp()
	}
	return c, f.HeldEpoch(), stamp, nil
}

// tell tells the running follower where each epoch that began since it
// was last told started (the FSM just applied something): a standby cut
// off from the stream meanwhile, or opened before its member's failover
// state caught up, learns the epochs it missed. Checkpoints change no
// epoch and cost a lock and a load.
func (fr *followers) tell() {
	if f, st := fr.tellLocked(); f != nil {
		// On a goroutine of its own: a seal waits on the standby's lock,
		// and neither get (a new primary's fetch, a seal answer) nor Run's
		// loop (which starts the lead) may wait on it. The new leader
		// seals this standby too; this only comes sooner for a standby
		// opened before its failover state caught up.
		go func() {
			if err := sealRecorded(f, st); err != nil && !errors.Is(err, standby.ErrTakenOver) {
				fr.n.log.Warn("recorded seal", "err", err)
			}
		}()
	}
}

// tellLocked tells the running follower the epoch starts it lacks and
// returns it with the state when it is to seal a newly recorded seal.
func (fr *followers) tellLocked() (Follower, *fsm.State) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.cur == nil {
		return nil, nil // none runs (primary)
	}
	st := fr.n.fsm.State()
	if st.Session() != fr.checked {
		checked, err := checkSession(fr.cur, st)
		if err != nil {
			select {
			case fr.errc <- err:
			default:
			}
			return nil, nil
		}
		fr.checked = checked
	}
	var seal Follower
	if st.Sealed() > fr.sealed {
		seal, fr.sealed = fr.cur, st.Sealed()
	}
	if st.Epoch() > fr.told {
		knowEpochs(fr.cur, st, fr.told)
		fr.told = st.Epoch()
	}
	return seal, st
}

// knowEpochs tells k where every epoch of st's session after epoch after
// began, oldest first: epoch e+1 at the cut of e plus one, and the
// current epoch at its start (1 when the session began inside it). Cuts
// of older sessions number another sequence and are left out.
func knowEpochs(k Follower, st *fsm.State, after uint64) {
	if st.Session() == 0 {
		return
	}
	for _, c := range st.Cuts() {
		if c.Session == st.Session() && c.Epoch < uint64(^uint32(0)) && c.Epoch+1 > after {
			k.KnowEpoch(uint32(c.Epoch+1), c.Last+1)
		}
	}
	if e := st.Epoch(); e != 0 && e > after && e <= uint64(^uint32(0)) {
		k.KnowEpoch(uint32(e), st.EpochStart())
	}
}

// openCatchUpFactor bounds, in seal timeouts (10 s with the LAN profile),
// how long a restarted member waits for its failover state to catch up
// before it opens its standby anyway: room for a leader whose replication
// to the dead member backed off (hashicorp/raft waits up to ~10 s between
// tries), not for a group that has no leader. Epoch starts applied after
// the standby opened are told as they apply (followers.tell).
const openCatchUpFactor = 20

// awaitFailoverState returns once a restarted member's failover state has
// caught up with the group (fsmCaughtUp), when ctx ends, or after
// openCatchUpFactor seal timeouts, saying which in the log. A new member
// (nothing on disk) does not wait: it missed nothing.
func (n *Member) awaitFailoverState(ctx context.Context) {
	from := n.store.startIndex
	if from == 0 {
		return
	}
	t0 := time.Now()
	bound := time.NewTimer(openCatchUpFactor * n.cfg.Timeouts.Seal)
	defer bound.Stop()
	// Leadership and the commit index move without an FSM token.
	poll := time.NewTicker(n.cfg.Timeouts.Commit)
	defer poll.Stop()
	for {
		if n.fsmCaughtUp(from) {
			st := n.fsm.State()
			n.log.Info("failover state caught up with the group; opening the standby", "epoch", st.Epoch(),
				"applied", st.AppliedIndex(), "commit", n.raft.CommitIndex(), "index_on_disk", from, "waited_ms", time.Since(t0).Milliseconds())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-bound.C:
			st := n.fsm.State()
			n.log.Warn("failover state not caught up with the group in time; opening the standby with the epoch starts it knows (later ones are told as they apply)",
				"epoch", st.Epoch(), "applied", st.AppliedIndex(), "commit", n.raft.CommitIndex(), "index_on_disk", from, "waited_ms", time.Since(t0).Milliseconds())
			return
		case <-n.applied:
			n.signalChanged()
		case <-poll.C:
		}
	}
}

// fsmCaughtUp says whether the FSM holds every command up to Raft's
// commit index, and that index reaches what was on disk at start (from):
// Raft learns it from the leader (or, as leader, by committing), so the
// state then holds what the group had committed, every epoch start
// included. Raft's AppliedIndex counts entries handed to the FSM, not
// applied, and the FSM's own index counts commands only: the entries
// between the two are read from the log (noops and configuration changes
// do not matter).
func (n *Member) fsmCaughtUp(from uint64) bool {
	commit := n.raft.CommitIndex()
	if commit < from || n.raft.AppliedIndex() < commit {
		return false
	}
	applied := n.fsm.State().AppliedIndex()
	var l raft.Log
	for i := commit; i > applied; i-- {
		err := n.store.deps.Logs.GetLog(i, &l)
		if errors.Is(err, raft.ErrLogNotFound) {
			break // compacted: in a snapshot the FSM took or restored
		}
		if err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// The standby is the Member's follower.
var _ Follower = (*standby.Agent)(nil)
