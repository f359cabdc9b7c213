package ops

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sequencer"
)

// MemberReadyLagSeqs is how far (in seqs) a standby may hold less than
// the primary published and still be ready.
const MemberReadyLagSeqs = 1024

// memberReadyTimeout bounds a standby's question to the primary during a
// readiness check.
const memberReadyTimeout = time.Second

// MemberSurface is the admin surface of a sequencer cluster member: the
// commands status, members, transfer-primary, add-member, remove-member
// (pairs, activate and force-passive when the member is an
// ActivationMember; replayers, which a member cannot answer), its readiness (a primary sequences; a standby knows the
// primary and holds within MemberReadyLagSeqs of what it published), its
// metrics (MemberCollector) and the routes older clients use (Handler).
func MemberSurface(m Member, auth Auth) *Surface {
	// A standby's readiness asks the primary with this member's token
	// (the members of a deployment share one when off loopback) and its
	// certificate (with TLS).
	ms := &memberSurface{m: m, started: time.Now().UnixNano(), client: auth.Client()}
	s := NewSurface(auth, ms, HealthFuncs{LiveFunc: ms.live, ReadyFunc: ms.ready})
	s.member = m
	s.Table.MustAdd(
		Command{Name: "members", Help: "the cluster's members as this member's failover state has them", Run: func(context.Context, []string) (any, error) {
			return m.Status().Members, nil
		}},
		Command{Name: "transfer-primary", Args: "[ID]", Mutates: true, Help: "hand the primary role to member ID (default: the standby raft picks) with nothing lost (on the primary)", Run: ms.transfer},
		Command{Name: "add-member", Args: "ID@RAFT@ADMIN@PEER", Mutates: true, Help: "add a voter, live (start it first with --join; on the primary)", Run: ms.add},
		Command{Name: "remove-member", Args: "ID", Mutates: true, Help: "remove a member, live (not the primary; never below three voters; on the primary)", Run: ms.remove},
		Command{Name: "replayers", Help: "replayers and their ranges (not known to a member: ask the admin node)", Run: notYet("a member does not follow gossip: ask seqd admin-node for the replayers")},
	)
	if am, ok := m.(ActivationMember); ok {
		s.Table.MustAdd(activationCommands(am)...)
	} else {
		s.Table.MustAdd(
			Command{Name: "pairs", Help: "hot-hot pairs (this member cannot tell)", Run: notYet("this member keeps no hot-hot table")},
			Command{Name: "activate", Args: "ACCOUNT INSTANCE", Mutates: true, Help: "make an instance of a hot-hot account active (this member cannot)", Run: notYet("this member cannot change hot-hot activation")},
			Command{Name: "force-passive", Args: "ACCOUNT INSTANCE", Mutates: true, Help: "make an instance of a hot-hot account passive (this member cannot)", Run: notYet("this member cannot change hot-hot activation")},
		)
	}
	s.Registry.MustRegister(NewMemberCollector(m))
	if sq, ok := m.(interface{ SequencerStats() sequencer.Stats }); ok {
		// The primary's counters (cluster.Member has them).
		s.Registry.MustRegister(NewSequencerCollector(sq.SequencerStats))
	}
	return s
}

// notYet is the Run of a command a process knows and cannot do.
func notYet(why string) func(context.Context, []string) (any, error) {
	return func(context.Context, []string) (any, error) {
		return nil, fmt.Errorf("%w yet: %s", ErrNotSupported, why)
	}
}

type memberSurface struct {
	m       Member
	started int64
	client  *Client
}

func (ms *memberSurface) ProcessStatus() ProcessStatus {
	st := ms.m.Status()
	return ProcessStatus{Process: KindMember, Name: "member " + strconv.FormatUint(st.ID, 10), PID: os.Getpid(), StartedAt: ms.started, Member: &st}
}

// live: Raft runs and the member was not shut down.
func (ms *memberSurface) live() error {
	st := ms.m.Status()
	if st.RaftState == "Shutdown" || st.Role == "stopped" {
		return fmt.Errorf("ops: not live: member %d is %s (raft %s)", st.ID, st.Role, st.RaftState)
	}
	return nil
}

func (ms *memberSurface) ready() error {
	st := ms.m.Status()
	return memberReady(st, func(ctx context.Context, addr string) (MemberStatus, error) {
		return ms.client.fetchMember(ctx, addr, "/v1/status?ready=skip")
	})
}

// memberReady decides a member's readiness from its status st, asking
// the primary's admin endpoint (fetch) what it published when st is a
// standby's.
func memberReady(st MemberStatus, fetch func(context.Context, string) (MemberStatus, error)) error {
	if st.Primary == 0 {
		return fmt.Errorf("%w: no primary known (epoch %d, raft %s)", ErrNotReady, st.Epoch, st.RaftState)
	}
	if st.Primary == st.ID {
		if st.Role != "primary" {
			return fmt.Errorf("%w: primary of epoch %d, not sequencing yet (%s)", ErrNotReady, st.Epoch, st.Role)
		}
		return nil
	}
	var addr string
	for _, p := range st.Members {
		if p.ID == st.Primary {
			addr = p.AdminAddr
		}
	}
	if addr == "" {
		return fmt.Errorf("%w: primary %d has no admin address in the failover state", ErrNotReady, st.Primary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberReadyTimeout)
	defer cancel()
	p, err := fetch(ctx, addr)
	if err != nil {
		return fmt.Errorf("%w: primary %d at %s does not answer: %v", ErrNotReady, st.Primary, addr, err)
	}
	if p.Role != "primary" {
		return fmt.Errorf("%w: member %d is not sequencing yet (%s)", ErrNotReady, st.Primary, p.Role)
	}
	if p.Published > st.Contiguous+MemberReadyLagSeqs {
		return fmt.Errorf("%w: catching up: holds %d of %d published (more than %d behind)", ErrNotReady, st.Contiguous, p.Published, MemberReadyLagSeqs)
	}
	return nil
}

func (ms *memberSurface) transfer(ctx context.Context, args []string) (any, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("%w: transfer-primary [ID]", ErrBadArgs)
	}
	var to uint64
	if len(args) == 1 {
		v, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("%w: ID must be a member id (>= 1), got %q", ErrBadArgs, args[0])
		}
		to = v
	}
	if st := ms.m.Status(); to != 0 && to == st.Primary && st.ID == st.Primary {
		return nil, fmt.Errorf("%w: member %d is the primary already (epoch %d): nothing to transfer", ErrAlreadyPrimary, to, st.Epoch)
	}
	return ms.m.TransferPrimary(ctx, to)
}

func (ms *memberSurface) add(_ context.Context, args []string) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%w: add-member ID@RAFT@ADMIN@PEER", ErrBadArgs)
	}
	m, err := ParseMember(args[0])
	if err != nil {
		return nil, err
	}
	if err := ms.m.AddMember(m); err != nil {
		return nil, err
	}
	return ms.m.Status(), nil
}

func (ms *memberSurface) remove(_ context.Context, args []string) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%w: remove-member ID", ErrBadArgs)
	}
	id, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || id == 0 {
		return nil, fmt.Errorf("%w: ID must be >= 1, got %q", ErrBadArgs, args[0])
	}
	if err := ms.m.RemoveMember(id); err != nil {
		return nil, err
	}
	return ms.m.Status(), nil
}

// ParseMember reads ID@RAFT@ADMIN@PEER (a member without PEER is
// refused by the cluster: no new primary could seal it).
func ParseMember(s string) (fsm.Member, error) {
	parts := strings.Split(strings.TrimSpace(s), "@")
	if len(parts) < 3 || len(parts) > 4 {
		return fsm.Member{}, fmt.Errorf("%w: member %q: want ID@RAFT_ADDR@ADMIN_ADDR@PEER_ADDR", ErrBadArgs, s)
	}
	id, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || id == 0 {
		return fsm.Member{}, fmt.Errorf("%w: member %q: id must be >= 1", ErrBadArgs, s)
	}
	m := fsm.Member{ID: id, Role: fsm.Voter, RaftAddr: parts[1], AdminAddr: parts[2]}
	if len(parts) == 4 {
		m.StreamAddr = parts[3]
	}
	return m, nil
}
