package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/wire"
)

// Seal seals this member for epoch (it stops acking epoch and every
// earlier one) and says what it holds: the answer to a new primary's
// seal, on the peer port (PeerServer). A seal of an epoch the failover
// state has not reached is refused (failover.CheckSeal: believed, it
// would make every later seal fail and the standby never ack again). A
// member that runs no standby because it sequences (deposed from Raft,
// not yet stopped) answers for what its store wrote and counts no more
// toward stable. The answer carries the newest sequencer time the member
// saw (the old primary's last heartbeat included): the new epoch's clock
// floor. Safe from any goroutine.
func (n *Member) Seal(epoch uint32) (wire.PeerSealReply, error) {
	if err := failover.CheckSeal(n.fsm.State(), uint64(epoch)); err != nil {
		return wire.PeerSealReply{}, err
	}
	c, held, stamp, err := n.fr.seal(epoch)
	if errors.Is(err, errNotFollowing) {
		if p := n.self.Load(); p != nil {
			c, err = p.seal(epoch, n.published.Load())
			held = p.epoch
			stamp = n.lastStamp.Load() // its own last record or heartbeat
		}
	}
	if err != nil {
		return wire.PeerSealReply{}, err
	}
	return wire.PeerSealReply{Member: n.cfg.ID, Contiguous: c, HeldEpoch: held, LastStamp: max(stamp, 0)}, nil
}

// PeerStatus is this member's role, the epoch of its failover state, the
// start of its current or last epoch as primary (what a member that
// handed the primary role over waits on: TransferPrimary) and what its
// standby's store holds (what the primary's checkpointer counts). Safe
// from any goroutine.
func (n *Member) PeerStatus() wire.PeerStatusReply {
	r := wire.PeerStatusReply{Member: n.cfg.ID, Epoch: n.fsm.State().Epoch(), StartedAt: n.startedAt.Load(), Role: uint8(n.Role())}
	if f := n.fr.get(); f != nil {
		r.Contiguous = f.Contiguous()
	}
	return r
}

// minVoters is the fewest voters RemoveMember leaves.
const minVoters = 3

// Status is this member's view of the cluster.
func (n *Member) Status() ops.MemberStatus {
	st := n.fsm.State()
	_, leader := n.raft.LeaderWithID()
	s := ops.MemberStatus{
		ID:         n.cfg.ID,
		Role:       n.Role().String(),
		RaftState:  n.raft.State().String(),
		Term:       n.raft.CurrentTerm(),
		Leader:     parseServerID(leader),
		Session:    st.Session(),
		Epoch:      st.Epoch(),
		Primary:    st.Primary(),
		EpochStart: st.EpochStart(),
		Applied:    st.AppliedIndex(),
		StartedAt:  n.startedAt.Load(),
		StoppedAt:  n.stoppedAt.Load(),
		Change:     n.lastChange.Load(),
		Members:    ops.PeersOf(st.Members()),
	}
	if t := n.raft.LastContact(); !t.IsZero() && s.Leader != n.cfg.ID {
		s.LastContactNS = time.Since(t).Nanoseconds()
	}
	if f := n.fr.get(); f != nil {
		s.Contiguous = f.Contiguous()
	}
	if n.Role() == RolePrimary {
		// It holds what it published (its standby's store is its history).
		s.Stable, s.Published = n.stable.Load(), n.published.Load()
		s.Contiguous = s.Published
	}
	return s
}

// TransferPrimary hands the primary role to member to (0: the standby
// raft picks, the most up to date) with nothing lost: this primary stops
// taking commands, waits (up to a lease) until its standbys hold all it
// published, stops, and asks raft to transfer the leadership; the target
// then seals, finds nothing to fetch, and begins the next epoch at once.
// It returns when the new epoch is committed, with the pause between the
// last loop of this primary and the first record of the new one.
func (n *Member) TransferPrimary(ctx context.Context, to uint64) (ops.Handover, error) {
	if n.Role() != RolePrimary {
		return ops.Handover{}, n.notPrimary()
	}
	st := n.fsm.State()
	var target fsm.Member
	if to != 0 {
		m, ok := st.Member(to)
		if !ok || m.Role != fsm.Voter || to == n.cfg.ID {
			return ops.Handover{}, fmt.Errorf("%w: %d is not another voting member", ErrUnknownMember, to)
		}
		target = m
	}
	h := ops.Handover{From: n.cfg.ID, To: to}
	// Let the standbys catch up with what was published, so the cut is
	// the last seq and no message is sent again.
	deadline := time.Now().Add(n.cfg.Timeouts.LeaderLease)
	for n.stable.Load() < n.published.Load() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	n.handover.Store(true)
	n.wakePrimary() // its loop may be blocked until its next heartbeat
	for n.Role() == RolePrimary {
		time.Sleep(50 * time.Microsecond)
	}
	var f raft.Future
	if to != 0 {
		f = n.raft.LeadershipTransferToServer(serverID(to), raft.ServerAddress(target.RaftAddr))
	} else {
		f = n.raft.LeadershipTransfer()
	}
	if err := f.Error(); err != nil {
		n.handover.Store(false)
		select {
		case n.relead <- struct{}{}:
		default:
		}
		return h, fmt.Errorf("%w: %v", ErrTransfer, err)
	}
	// Wait for the new epoch, as this member applies it.
	wait := time.Now().Add(4 * n.cfg.Timeouts.Seal)
	for {
		cur := n.fsm.State()
		if cur.Epoch() > st.Epoch() && cur.Primary() != 0 {
			// Usually the target; another member (this one included) when
			// the target could not take over and stepped aside.
			h.To, h.Epoch = cur.Primary(), cur.Epoch()
			if c, ok := cur.Cut(st.Epoch()); ok {
				h.Cut = c.Last
			}
			// The pause ends at the new primary's first record: ask it
			// (on its peer port) until it sequences the new epoch.
			m, _ := cur.Member(h.To)
			for time.Now().Before(wait) && ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, n.cfg.Timeouts.Seal)
				ms, err := n.peers.RequestPeerStatus(sctx, m.StreamAddr)
				cancel()
				if err == nil && Role(ms.Role) == RolePrimary && ms.Epoch == h.Epoch && ms.StartedAt != 0 {
					h.PauseUS = (ms.StartedAt - n.stoppedAt.Load()) / 1000
					break
				}
				time.Sleep(time.Millisecond)
			}
			return h, nil
		}
		if time.Now().After(wait) || ctx.Err() != nil {
			return h, fmt.Errorf("%w: no new epoch after %v", ErrTransfer, 4*n.cfg.Timeouts.Seal)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func (n *Member) notPrimary() error {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return fmt.Errorf("%w: member %d (no leader known)", ErrNotPrimary, n.cfg.ID)
	}
	m, _ := n.fsm.State().Member(parseServerID(id))
	return fmt.Errorf("%w: member %d; the leader is %s at %s (admin %s)", ErrNotPrimary, n.cfg.ID, id, addr, m.AdminAddr)
}

// AddMember adds m, live. A voter joins as a nonvoter first (raft's
// AddNonvoter, then the failover state's member table), and is promoted
// (AddVoter, SetRole) only once it caught up: its failover state reached
// the current epoch and its standby acked what is stable. A voter added at
// once, while another was dead, made stable and every seal wait for the
// newcomer to repair the whole session, and one not yet running cost
// the group its Raft quorum (issue 14 item 3). A member that does not
// catch up within catchUpTimeoutFactor seal timeouts stays a nonvoter
// (ErrNotCaughtUp); add it again to promote it. The new member must be
// started with the same members list and an empty Dir; it does not
// bootstrap (a member not in its own list fails Validate), so give it
// every member, itself included.
func (n *Member) AddMember(m fsm.Member) error {
	if !n.IsLeader() {
		return n.notPrimary()
	}
	if m.Role == 0 {
		m.Role = fsm.Voter
	}
	if m.StreamAddr == "" {
		// A member no new primary can seal could leave the group
		// without a quorum to seal.
		return fmt.Errorf("%w: member %d has no peer address (ID@RAFT@ADMIN@PEER)", ErrConfig, m.ID)
	}
	// Everything the FSM would refuse is refused before Raft's own
	// configuration changes: a nonvoter added to Raft whose AddMember
	// the FSM then refused (a role of 7) was an orphan no remove-member
	// could name (issue 16).
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, a := range []string{m.RaftAddr, m.StreamAddr} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: member %d: address %q: %w", ErrConfig, m.ID, a, err)
		}
	}
	if cur, ok := n.fsm.State().Member(m.ID); ok {
		same := cur.RaftAddr == m.RaftAddr && cur.StreamAddr == m.StreamAddr
		switch {
		case same && cur.Role == m.Role:
			return nil
		case same && cur.Role == fsm.Nonvoter && m.Role == fsm.Voter:
			// Added before: promote it once it has caught up.
			return n.promote(cur)
		}
		return fmt.Errorf("%w: %d (remove it first to change its addresses or demote it)", fsm.ErrMemberExists, m.ID)
	}
	f := n.raft.AddNonvoter(serverID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.cfg.Timeouts.Seal)
	if err := f.Error(); err != nil {
		return n.raftErr("add server", err)
	}
	nv := m
	nv.Role = fsm.Nonvoter
	if _, err := n.apply(fsm.AddMember{Member: nv}); err != nil {
		return err
	}
	if m.Role != fsm.Voter {
		return nil
	}
	return n.promote(nv)
}

// ackedBy is the optional Acks ability AddMember reads: the highest seq a
// member acked in the epoch, voter or not (QuorumAcks).
type ackedBy interface {
	AckedBy(member uint64) (uint64, bool)
}

// promote makes nonvoter m a voter once it caught up.
func (n *Member) promote(m fsm.Member) error {
	bound := catchUpTimeoutFactor * n.cfg.Timeouts.Seal
	deadline := time.Now().Add(bound)
	for {
		ok, why := n.caughtUp(m)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: member %d is a nonvoter and has not caught up within %v (%s): add it again to promote it", ErrNotCaughtUp, m.ID, bound, why)
		}
		if !n.IsLeader() {
			return n.notPrimary()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.raft.AddVoter(serverID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.cfg.Timeouts.Seal).Error(); err != nil {
		return n.raftErr("promote server", err)
	}
	_, err := n.apply(fsm.SetRole{ID: m.ID, Role: fsm.Voter})
	return err
}

// caughtUp says whether nonvoter m may be promoted: its failover state
// reached this member's epoch (asked on its peer port) and, while this
// member sequences with an ack tracker that can tell, its standby acked
// what is stable. Otherwise it says what it lacks.
func (n *Member) caughtUp(m fsm.Member) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Timeouts.Seal)
	s, err := n.peers.RequestPeerStatus(ctx, m.StreamAddr)
	cancel()
	if err != nil {
		return false, err.Error()
	}
	if e := n.fsm.State().Epoch(); s.Epoch < e {
		return false, fmt.Sprintf("its failover state is at epoch %d of %d", s.Epoch, e)
	}
	if r := n.acks.Load(); r != nil {
		if a, ok := r.a.(ackedBy); ok {
			stable := n.stable.Load()
			if got, ok := a.AckedBy(m.ID); !ok || got < stable {
				return false, fmt.Sprintf("its standby acked %d, stable is %d", got, stable)
			}
		}
	}
	return true, ""
}

// RemoveMember removes member id, live: the failover state first (which
// refuses to remove the primary: transfer the role first), then raft's
// configuration. It refuses to leave fewer than minVoters voters: to
// replace a member, add the new one first, then remove the old.
func (n *Member) RemoveMember(id uint64) error {
	if !n.IsLeader() {
		return n.notPrimary()
	}
	st := n.fsm.State()
	m, ok := st.Member(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownMember, id)
	}
	voters := 0
	for _, o := range st.Members() {
		if o.Role == fsm.Voter {
			voters++
		}
	}
	if m.Role == fsm.Voter && voters-1 < minVoters {
		// With two voters left, a seal counts only the one standby: seqs
		// made stable by the primary and the removed member could be cut.
		return fmt.Errorf("%w: removing member %d leaves %d voters", ErrTooFewVoters, id, voters-1)
	}
	if _, err := n.apply(fsm.RemoveMember{ID: id}); err != nil {
		return err
	}
	if err := n.raft.RemoveServer(serverID(id), 0, n.cfg.Timeouts.Seal).Error(); err != nil {
		return n.raftErr("remove server", err)
	}
	return nil
}

// The admin endpoint serves a Member.
var _ ops.Member = (*Member)(nil)
