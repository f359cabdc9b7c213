package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/tiered"
)

// `seqd admin activate` and `seqd admin force-passive`: hot-hot
// activation changes, carried out by the primary in the stream.
func adminActivationCommands(flags []cli.Flag) []*cli.Command {
	cmd := func(name, usage string) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			Flags:     flags,
			ArgsUsage: "ACCOUNT INSTANCE",
			Action:    func(c *cli.Context) error { return runAdminActivation(c, name) },
		}
	}
	return []*cli.Command{
		cmd("activate", "make INSTANCE the active instance of hot-hot ACCOUNT (records in the stream)"),
		cmd("force-passive", "make INSTANCE of hot-hot ACCOUNT passive; its live partner takes over (refused with none)"),
	}
}

func runAdminActivation(c *cli.Context, op string) error {
	if c.NArg() != 2 {
		return fmt.Errorf("admin %s: want ACCOUNT INSTANCE, got %q", op, c.Args().Slice())
	}
	inst, err := strconv.ParseUint(c.Args().Get(1), 10, 8)
	if err != nil {
		return fmt.Errorf("admin %s: INSTANCE must be 0..255, got %q", op, c.Args().Get(1))
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	p, _, err := primaryAddr(ctx, cl, adminAddrs(c))
	if err != nil {
		return err
	}
	a, err := cl.RequestActivation(ctx, p, op, c.Args().Get(0), uint8(inst))
	if err != nil {
		return err
	}
	fmt.Printf("admin %s: account=%s instance=%d seq=%d\n", op, a.Account, a.Instance, a.Seq)
	return nil
}

// printPairs lists the hot-hot accounts the primary holds (after the
// members in `seqd admin status`), if any: each instance, the active one
// marked.
func printPairs(ctx context.Context, c *cli.Context) error {
	if err := printGossipNodes(c); err != nil {
		return err
	}
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	p, _, err := primaryAddr(ctx, cl, adminAddrs(c))
	if err != nil {
		return nil // no primary now: the members' table said so
	}
	ps, err := cl.FetchPairs(ctx, p)
	if err != nil || len(ps) == 0 {
		return nil // no primary now, or no pair: nothing to list
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "PAIR\tACTIVE\tINSTANCES (instance:incarnation@last_seq)\tLAST_ID (seq.send)")
	for _, pr := range ps {
		active := "-"
		if pr.Active >= 0 {
			active = strconv.Itoa(pr.Active)
		}
		var in []string
		for _, i := range pr.Instances {
			in = append(in, fmt.Sprintf("%d:%d@%d", i.Instance, i.Incarnation, i.LastSeq))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d.%d\n", pr.Account, active, strings.Join(in, " "), pr.LastID>>16, pr.LastID&0xffff)
	}
	return w.Flush()
}

// printGossipNodes, with --gossip, joins the gossip of the nodes for
// gossip.wait and lists the node instances that announce an account:
// each with its instance, whether it says it is active, and the last seq
// it applied (as it announced it; memberlist spreads it within a second).
func printGossipNodes(c *cli.Context) error {
	if !gossipOn(c) {
		return nil
	}
	a, err := startGossip(c, options.NewLogger(c), func() tiered.Meta { return tiered.Meta{Role: tiered.RoleNode} })
	if err != nil {
		return err
	}
	defer a.Close()
	deadline := time.Now().Add(c.Duration("gossip.wait"))
	var nodes []tiered.Member
	for {
		nodes = nodes[:0]
		for _, m := range a.Members() {
			if m.Err == nil && m.Meta.Role == tiered.RoleNode && m.Meta.Account != "" {
				nodes = append(nodes, m)
			}
		}
		if len(nodes) > 0 && time.Now().After(deadline.Add(-c.Duration("gossip.wait")/2)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tACCOUNT\tINSTANCE\tSTATE\tAPPLIED")
	for _, m := range nodes {
		state := "passive"
		if m.Meta.Active {
			state = "active"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\n", m.Name, m.Meta.Account, m.Meta.Instance, state, m.Meta.Applied)
	}
	return w.Flush()
}
