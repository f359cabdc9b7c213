package main

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/ops/adminnode"
	"github.com/seqd/seqd/tiered"
)

// memberGossipFlags are the gossip keys of a cluster member: with them it
// announces itself (role sequencer, its admin endpoint, what it holds),
// so that `seqd admin-node` finds the group.
func memberGossipFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range gossipFlags(false) {
		if f.Names()[0] != "gossip.wait" {
			out = append(out, f)
		}
	}
	return out
}

// startMemberGossip is `seqd sequencer --cluster --gossip`: nil when
// gossip is off.
func startMemberGossip(c *cli.Context, log *slog.Logger, m *cluster.Member) (*tiered.Agent, error) {
	if !gossipOn(c) {
		return nil, nil
	}
	admin := m.AdminAddr()
	a, err := startGossip(c, log, func() tiered.Meta {
		st := m.Status()
		return tiered.Meta{Role: tiered.RoleSequencer, Session: st.Session, Highest: st.Contiguous, AdminAddr: admin}
	})
	if err != nil {
		return nil, err
	}
	// The member's status page lists the replayers gossip shows.
	m.SetPageReplayers(adminnode.NewDeployment(a, nil).Replayers)
	return a, nil
}
