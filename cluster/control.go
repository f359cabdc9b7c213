package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/wire"
)

// Seal seals this member's standby for epoch (it stops acking epoch and
// every earlier one) and says what it holds: the answer to a new
// primary's seal, on the peer port (PeerServer). Safe from any goroutine.
func (n *Member) Seal(epoch uint32) (wire.PeerSealReply, error) {
	c, held, err := n.fr.seal(epoch)
	if err != nil {
		return wire.PeerSealReply{}, err
	}
	r := wire.PeerSealReply{Member: n.cfg.ID, Contiguous: c, HeldEpoch: held}
	if n.holdsOwn(uint64(epoch), c) {
		r.Flags |= wire.PeerHoldsOwn
	}
	return r, nil
}

// PeerStatus is this member's role, the epoch of its failover state and
// the start of its current or last epoch as primary: what a member that
// handed the primary role over waits on (TransferPrimary). Safe from any
// goroutine.
func (n *Member) PeerStatus() wire.PeerStatusReply {
	return wire.PeerStatusReply{Member: n.cfg.ID, Epoch: n.fsm.State().Epoch(), StartedAt: n.startedAt.Load(), Role: uint8(n.Role())}
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

// sealQuorum seals the current epoch of st on every voter (this member
// directly, the others through their peer ports: RequestSeal) and returns, once
// a quorum answered, the highest contiguous seq among the answers (the
// cut) and the peer addresses of the members that answered, best first.
// Every quorum intersects the one that made any seq stable, and a sealed
// member acks nothing more of the epoch, so the cut keeps every stable
// seq and no later one can become stable.
func (n *Member) sealQuorum(ctx context.Context, st *fsm.State) (uint64, []string, error) {
	epoch := st.Epoch()
	var voters []fsm.Member
	for _, m := range st.Members() {
		if m.Role == fsm.Voter {
			voters = append(voters, m)
		}
	}
	if len(voters) == 0 {
		return 0, nil, fmt.Errorf("%w: no voters in the failover state", ErrNoQuorum)
	}
	quorum := len(voters)/2 + 1
	if _, isVoter := st.Member(st.Primary()); isVoter && len(voters)-1 < quorum {
		// A group of one (or two): no quorum without the primary.
		quorum = len(voters) - 1
	}
	type answer struct {
		m    fsm.Member
		c    uint64
		own  bool   // holds its own epoch (as that epoch's primary)
		held uint32 // epoch of its newest held record (0: unknown)
		err  error
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeouts.Seal)
	defer cancel()
	answers := make(chan answer, len(voters))
	for _, m := range voters {
		go func() {
			if m.ID == n.cfg.ID {
				c, held, err := n.fr.seal(uint32(epoch))
				answers <- answer{m, c, err == nil && n.holdsOwn(epoch, c), held, err}
				return
			}
			r, err := n.sealRemote(ctx, m, epoch)
			answers <- answer{m, r.Contiguous, r.Flags&wire.PeerHoldsOwn != 0, r.HeldEpoch, err}
		}()
	}
	type got struct {
		c    uint64
		addr string
	}
	var ok []got
	var errs []error
	// counted are the answers that count toward the quorum: not the
	// sealed epoch's own primary's, unless it says it holds everything it
	// published (HoldsOwn: its primacy ended with the process alive, and
	// its store took every packet). Its stable counted what it published;
	// after a restart its store may lack the tail it had not written, and
	// its answer would understate what it counted, so a quorum with it
	// need not intersect the quorum that made a seq stable. Its answer
	// still raises the cut.
	counted := 0
	// Once a quorum answered, the others get a short grace (the commit
	// timeout): a higher cut drops fewer messages, and a live member
	// left out of the quorum could hold records above the cut, which it
	// would have to drop (its standby diverges). A dead member's
	// connection is refused at once on a LAN, so the grace is rarely
	// waited out.
	// noQuorum says how many answered and how many of those counted: an
	// answer from the sealed epoch's own primary that does not hold all
	// it published raises the cut but is not part of the quorum, so "2
	// of 3 answered" can still be too few.
	noQuorum := func() error {
		return fmt.Errorf("%w: epoch %d: %d of %d answered, %d counted toward the quorum (member %d, the sealed epoch's primary, counts only when it holds all it published), need %d: %v",
			ErrNoQuorum, epoch, len(ok), len(voters), counted, st.Primary(), max(quorum, 1), errors.Join(errs...))
	}
	var grace <-chan time.Time
collect:
	for range voters {
		var a answer
		select {
		case a = <-answers:
		case <-grace:
			break collect
		case <-ctx.Done():
			if counted >= quorum && len(ok) > 0 {
				break collect
			}
			return 0, nil, noQuorum()
		}
		if a.err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", a.m.ID, a.err))
			continue
		}
		c, stale := capStale(st, a.c, a.held)
		addr := a.m.StreamAddr
		if stale {
			// Its store holds cut records past c: no fetch source.
			addr = ""
		}
		ok = append(ok, got{c, addr})
		if a.m.ID != st.Primary() || a.own {
			counted++
			if counted == quorum {
				grace = time.After(n.cfg.Timeouts.Commit)
			}
		}
	}
	if counted < quorum || len(ok) == 0 {
		// A quorum of 0 (the only voter is the sealed epoch's primary)
		// still needs one answer: without any, no cut is known.
		return 0, nil, noQuorum()
	}
	slices.SortFunc(ok, func(a, b got) int {
		switch {
		case a.c > b.c:
			return -1
		case a.c < b.c:
			return 1
		}
		return 0
	})
	peers := make([]string, 0, len(ok))
	for _, g := range ok {
		if g.addr != "" {
			peers = append(peers, g.addr)
		}
	}
	return ok[0].c, peers, nil
}

// capStale caps a seal answer c whose newest held record is of epoch held,
// older than st's (sealed) epoch, at the cut of held, and says whether it
// did. A member that missed the epoch changes after held (down or cut off
// meanwhile) cannot tell from the stream where held was cut and reports
// the cut records of its tail: counted, they would raise the cut past
// seqs the next epochs gave to other messages. Such a member is no fetch
// source either. An answer without held (0) or whose cut is no longer
// recorded is taken as it is.
func capStale(st *fsm.State, c uint64, held uint32) (uint64, bool) {
	if held == 0 || uint64(held) >= st.Epoch() {
		return c, false
	}
	cut, ok := st.Cut(uint64(held))
	if !ok || cut.Session != st.Session() || c <= cut.Last {
		return c, false
	}
	return cut.Last, true
}

// sealRemote seals epoch on member m through its peer port.
func (n *Member) sealRemote(ctx context.Context, m fsm.Member, epoch uint64) (wire.PeerSealReply, error) {
	if m.StreamAddr == "" {
		return wire.PeerSealReply{}, fmt.Errorf("%w: member %d has no peer address", ErrSealRefused, m.ID)
	}
	return RequestSeal(ctx, m.StreamAddr, uint32(epoch))
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
				ms, err := RequestPeerStatus(sctx, m.StreamAddr)
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

// AddMember adds m as a voter, live: raft's configuration first (AddVoter
// waits until the change commits), then the failover state's member table.
// The new member must be started with the same members list and an empty
// Dir; it does not bootstrap (a member not in its own list fails
// Validate), so give it every member, itself included.
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
	var f raft.IndexFuture
	if m.Role == fsm.Voter {
		f = n.raft.AddVoter(serverID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.cfg.Timeouts.Seal)
	} else {
		f = n.raft.AddNonvoter(serverID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.cfg.Timeouts.Seal)
	}
	if err := f.Error(); err != nil {
		return n.raftErr("add server", err)
	}
	_, err := n.apply(fsm.AddMember{Member: m})
	return err
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
