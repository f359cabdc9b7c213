package ops

import (
	"github.com/prometheus/client_golang/prometheus"
)

// raftStates are hashicorp/raft's state names, for seqd_raft_state.
var raftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}

// roles are a member's roles, for seqd_member_role.
var memberRoles = []string{"standby", "sealing", "primary", "stopped"}

// NewMemberCollector reports a cluster member's metrics from one Status
// per scrape: its position (epoch, stable, published, held), who is
// primary, its Raft state, term and last leader contact, and the seal and
// election durations of the epoch changes it led (histograms fed at
// scrape time from its last change).
func NewMemberCollector(m Member) prometheus.Collector {
	c := NewSnapCollector(m.Status,
		Gauge("seqd_member_id", "this member's id", func(s *MemberStatus) float64 { return u(s.ID) }),
		Gauge("seqd_session", "the cluster's session id", func(s *MemberStatus) float64 { return u(s.Session) }),
		Gauge("seqd_epoch", "the epoch of the failover state", func(s *MemberStatus) float64 { return u(s.Epoch) }),
		Gauge("seqd_primary_id", "the primary of the current epoch (0: none)", func(s *MemberStatus) float64 { return u(s.Primary) }),
		Gauge("seqd_epoch_start_seq", "the first seq of the current epoch", func(s *MemberStatus) float64 { return u(s.EpochStart) }),
		Gauge("seqd_stable_seq", "the highest seq held by a quorum (the primary's; 0 on a standby)", func(s *MemberStatus) float64 { return u(s.Stable) }),
		Gauge("seqd_published_seq", "the last seq published (the primary's; 0 on a standby)", func(s *MemberStatus) float64 { return u(s.Published) }),
		Gauge("seqd_member_held_seq", "the highest contiguous seq this member's store holds", func(s *MemberStatus) float64 { return u(s.Contiguous) }),
		Gauge("seqd_members", "members in the failover state", func(s *MemberStatus) float64 { return float64(len(s.Members)) }),
		Gauge("seqd_raft_term", "the Raft term", func(s *MemberStatus) float64 { return u(s.Term) }),
		Gauge("seqd_raft_leader_id", "the Raft leader this member knows (0: none)", func(s *MemberStatus) float64 { return u(s.Leader) }),
		Gauge("seqd_raft_applied_index", "the last Raft index applied to the failover state", func(s *MemberStatus) float64 { return u(s.Applied) }),
		Gauge("seqd_raft_last_contact_seconds", "seconds since this member last heard from the Raft leader (0 on the leader)", func(s *MemberStatus) float64 { return float64(s.LastContactNS) / 1e9 }),
	)
	seal := newScrapeHistogram("seqd_seal_duration_seconds", "from becoming Raft leader to a quorum's seal answers, per epoch change this member led", changeBuckets)
	elect := newScrapeHistogram("seqd_election_duration_seconds", "from becoming Raft leader to the first record of the new epoch, per epoch change this member led", changeBuckets)
	stateDesc := prometheus.NewDesc("seqd_raft_state", "1 for this member's Raft state", []string{"state"}, nil)
	roleDesc := prometheus.NewDesc("seqd_member_role", "1 for this member's role", []string{"role"}, nil)
	c.xdesc = []*prometheus.Desc{stateDesc, roleDesc, seal.h.Desc(), elect.h.Desc()}
	c.extra = func(s *MemberStatus, ch chan<- prometheus.Metric) {
		for _, st := range raftStates {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, b2f(s.RaftState == st), st)
		}
		for _, r := range memberRoles {
			ch <- prometheus.MustNewConstMetric(roleDesc, prometheus.GaugeValue, b2f(s.Role == r), r)
		}
		if ch2 := s.Change; ch2 != nil && ch2.StartedUS > 0 {
			seal.observe(ch2.Epoch, float64(ch2.SealUS)/1e6)
			elect.observe(ch2.Epoch, float64(ch2.StartedUS)/1e6)
		}
		ch <- seal.h
		ch <- elect.h
	}
	return c
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
