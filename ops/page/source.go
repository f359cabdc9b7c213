package page

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/seqd/seqd/ops"
)

// Source gathers the deployment's state; the Handler calls it once per
// refresh (shared by every viewer). Gather must be safe from any
// goroutine and return by the time ctx ends.
type Source interface {
	Gather(ctx context.Context) Status
}

// SourceFunc is a function as a Source.
type SourceFunc func(ctx context.Context) Status

// Gather calls f.
func (f SourceFunc) Gather(ctx context.Context) Status { return f(ctx) }

// Cluster is the Source of a member (Local set) or of the admin node
// (Seeds set): it reads the sequencer group's statuses through their
// admin endpoints (ops.FetchStatus, ops.FetchAll), the replayers and
// pairs from the functions given. Any nil function is skipped.
type Cluster struct {
	// Name says who serves the page.
	Name string
	// Local is this member's own status (no round trip to itself).
	Local func() ops.MemberStatus
	// Seeds are admin addresses to ask when there is no Local: the
	// first that answers names the rest (its Members).
	Seeds func() []string
	// Client asks the members (nil: ops.DefaultClient, no token, plain
	// HTTP).
	Client *ops.Client
	// Replayers are the replayers gossip shows.
	Replayers func() []Replayer
	// Pairs are the hot-hot accounts the primary holds.
	Pairs func() []Pair
	// Extra are more tables to show.
	Extra func() []KeyValues
}

func (c *Cluster) client() *ops.Client {
	if c.Client == nil {
		return ops.DefaultClient
	}
	return c.Client
}

// Gather reads every member's status in parallel; a member that does
// not answer shows as unreachable with the reason.
func (c *Cluster) Gather(ctx context.Context) Status {
	s := Status{Source: c.Name, Members: []Member{}, Receivers: []Receiver{}, Replayers: []Replayer{}, Pairs: []Pair{}, Elections: []Election{}}
	var from ops.MemberStatus
	found := false
	if c.Local != nil {
		from, found = c.Local(), true
	} else if c.Seeds != nil {
		for _, a := range c.Seeds() {
			st, err := c.client().FetchStatus(ctx, a)
			if err != nil {
				s.Errors = append(s.Errors, fmt.Sprintf("%s: %v", a, err))
				continue
			}
			from, found = st, true
			break
		}
	}
	if found {
		answers := c.client().FetchAll(ctx, from)
		if c.Local != nil {
			// This member answers for itself without a round trip.
			for i := range answers {
				if answers[i].Member.ID == from.ID {
					answers[i].Status, answers[i].Err = from, nil
				}
			}
		}
		c.members(&s, from, answers)
	} else if c.Seeds != nil {
		s.Errors = append(s.Errors, "no sequencer member answered")
	}
	if c.Replayers != nil {
		s.Replayers = append(s.Replayers, c.Replayers()...)
		for _, r := range s.Replayers {
			s.Receivers = append(s.Receivers, Receiver{Name: r.Name, Kind: "replayer", Held: r.Highest, LagSeqs: sub(s.Stable, r.Highest)})
		}
	}
	if c.Pairs != nil {
		s.Pairs = append(s.Pairs, c.Pairs()...)
	}
	if c.Extra != nil {
		s.Extra = c.Extra()
	}
	s.Unhealthy = s.Primary == 0 || len(s.Errors) > 0
	return s
}

// members fills s from the answers of the group's members.
func (c *Cluster) members(s *Status, from ops.MemberStatus, answers []ops.MemberAnswer) {
	s.Session, s.Epoch, s.Primary = from.Session, from.Epoch, from.Primary
	for _, a := range answers {
		st := a.Status
		if a.Err == nil && st.Epoch > s.Epoch {
			// A member that applied more of the failover state knows better.
			s.Session, s.Epoch, s.Primary = st.Session, st.Epoch, st.Primary
		}
	}
	for _, a := range answers {
		m := Member{ID: a.Member.ID, AdminAddr: a.Member.AdminAddr}
		if a.Err != nil {
			m.Role, m.Error = "unreachable", a.Err.Error()
			s.Errors = append(s.Errors, fmt.Sprintf("member %d: %v", a.Member.ID, a.Err))
			s.Members = append(s.Members, m)
			continue
		}
		st := a.Status
		m.Role, m.RaftState, m.Term, m.Epoch, m.Contiguous = st.Role, st.RaftState, st.Term, st.Epoch, st.Contiguous
		s.Members = append(s.Members, m)
		if st.Role == "primary" && st.Epoch == s.Epoch {
			s.Stable, s.Published = st.Stable, st.Published
		}
		if ch := st.Change; ch != nil {
			s.Elections = append(s.Elections, Election{Epoch: ch.Epoch, Primary: st.ID, Cut: ch.Cut,
				LeaderAtNS: ch.LeaderAtNS, SealUS: ch.SealUS, StartedUS: ch.StartedUS})
		}
	}
	if !slices.ContainsFunc(s.Members, func(m Member) bool { return m.ID == s.Primary && m.Role == "primary" }) {
		// The failover state names a primary that does not sequence
		// (dead, or still sealing): say there is none now.
		s.Primary = 0
	}
	for _, m := range s.Members {
		if m.Role == "standby" {
			s.Receivers = append(s.Receivers, Receiver{Name: "member " + strconv.FormatUint(m.ID, 10), Kind: "standby",
				Held: m.Contiguous, LagSeqs: sub(s.Stable, m.Contiguous)})
		}
	}
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}
