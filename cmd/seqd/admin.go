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

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
)

// adminCommand talks to the control endpoints of a sequencer cluster
// (cluster.Member, loopback by default).
func adminCommand() *cli.Command {
	addr := &cli.StringFlag{Name: "addr", Value: "127.0.0.1:7400", Usage: "admin endpoint of any member (sequencer --admin-addr)", EnvVars: []string{"SEQD_ADMIN_ADDR"}}
	timeout := &cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}
	return &cli.Command{
		Name:  "admin",
		Usage: "administer a sequencer cluster: status, transfer-primary, add-member, remove-member, activate, force-passive",
		Subcommands: append([]*cli.Command{
			{
				Name:      "status",
				Usage:     "members, roles, epoch, primary, stable and lag; hot-hot pairs (with --gossip: the node instances too)",
				Flags:     append([]cli.Flag{addr, timeout}, gossipFlags(false)...),
				Action:    runAdminStatus,
				ArgsUsage: " ",
			},
			{
				Name:  "transfer-primary",
				Usage: "hand the primary role to member TO (default: the standby raft picks) with nothing lost",
				Description: `Asks the primary to stop taking commands, wait until its standbys hold
what it published, and transfer the Raft leadership; the new primary seals,
takes over at the cut and begins the next epoch. Prints the new primary,
epoch and cut, and the pause (the old primary's last loop to the new one's
first record).`,
				Flags:     []cli.Flag{addr, timeout},
				ArgsUsage: "[TO]",
				Action:    runAdminTransfer,
			},
			{
				Name:      "add-member",
				Usage:     "add a voter, live (start it first with --join and the full member list)",
				Flags:     []cli.Flag{addr, timeout},
				ArgsUsage: "ID@RAFT@ADMIN@PEER",
				Action:    runAdminAddMember,
			},
			{
				Name:      "remove-member",
				Usage:     "remove a member, live (not the primary: transfer the role first; never below three voters: add the replacement first)",
				Flags:     []cli.Flag{addr, timeout},
				ArgsUsage: "ID",
				Action:    runAdminRemoveMember,
			},
		}, adminActivationCommands(addr, timeout)...),
	}
}

func adminCtx(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, c.Duration("timeout"))
}

// primaryAddr finds the admin endpoint of the primary, starting from any
// member's.
func primaryAddr(ctx context.Context, addr string) (string, ops.MemberStatus, error) {
	st, err := ops.FetchStatus(ctx, addr)
	if err != nil {
		return "", st, err
	}
	if st.Primary == st.ID || st.Primary == 0 {
		return addr, st, nil
	}
	for _, m := range st.Members {
		if m.ID == st.Primary {
			return m.AdminAddr, st, nil
		}
	}
	return addr, st, nil
}

func runAdminStatus(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("admin status", c.Args().Slice())
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	first, err := ops.FetchStatus(ctx, c.String("addr"))
	if err != nil {
		return err
	}
	all := ops.FetchAll(ctx, first)
	var published uint64
	for _, s := range all {
		if s.Err == nil && s.Status.ID == first.Primary {
			published = s.Status.Published
		}
	}
	fmt.Printf("session=%d epoch=%d primary=%d epoch_start=%d members=%d\n", first.Session, first.Epoch, first.Primary, first.EpochStart, len(first.Members))
	w := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tRAFT\tTERM\tEPOCH\tSTABLE\tPUBLISHED\tHELD\tLAG\tADMIN")
	for _, s := range all {
		if s.Err != nil {
			fmt.Fprintf(w, "%d\tunreachable\t-\t-\t-\t-\t-\t-\t-\t%s (%v)\n", s.Member.ID, s.Member.AdminAddr, s.Err)
			continue
		}
		st := s.Status
		lag := "-"
		if published > 0 && st.Contiguous <= published {
			lag = strconv.FormatUint(published-st.Contiguous, 10)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", st.ID, st.Role, st.RaftState, st.Term, st.Epoch,
			dash(st.Stable), dash(st.Published), st.Contiguous, lag, s.Member.AdminAddr)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printPairs(ctx, c)
}

func dash(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

func runAdminTransfer(c *cli.Context) error {
	if c.NArg() > 1 {
		return strayArguments("admin transfer-primary", c.Args().Slice()[1:])
	}
	var to uint64
	if c.NArg() == 1 {
		v, err := strconv.ParseUint(c.Args().First(), 10, 64)
		if err != nil || v == 0 {
			return fmt.Errorf("admin transfer-primary: TO must be a member id (>= 1), got %q", c.Args().First())
		}
		to = v
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	addr, _, err := primaryAddr(ctx, c.String("addr"))
	if err != nil {
		return err
	}
	h, err := ops.RequestTransfer(ctx, addr, to)
	if err != nil {
		return err
	}
	fmt.Printf("admin: transferred primary from=%d to=%d epoch=%d cut=%d pause_ms=%.3f\n", h.From, h.To, h.Epoch, h.Cut, float64(h.PauseUS)/1000)
	return nil
}

// parseMember reads ID@RAFT@ADMIN@PEER (a member without PEER is
// refused by the cluster: no new primary could seal it).
func parseMember(s string) (fsm.Member, error) {
	parts := strings.Split(strings.TrimSpace(s), "@")
	if len(parts) < 3 || len(parts) > 4 {
		return fsm.Member{}, fmt.Errorf("member %q: want ID@RAFT_ADDR@ADMIN_ADDR@PEER_ADDR", s)
	}
	id, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || id == 0 {
		return fsm.Member{}, fmt.Errorf("member %q: id must be >= 1", s)
	}
	m := fsm.Member{ID: id, Role: fsm.Voter, RaftAddr: parts[1], AdminAddr: parts[2]}
	if len(parts) == 4 {
		m.StreamAddr = parts[3]
	}
	return m, nil
}

// parseMembers reads a comma-separated list of members.
func parseMembers(s string) ([]fsm.Member, error) {
	var ms []fsm.Member
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		m, err := parseMember(p)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func runAdminAddMember(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("admin add-member: want one ID@RAFT@ADMIN@PEER, got %q", c.Args().Slice())
	}
	m, err := parseMember(c.Args().First())
	if err != nil {
		return err
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	addr, _, err := primaryAddr(ctx, c.String("addr"))
	if err != nil {
		return err
	}
	if err := ops.RequestAddMember(ctx, addr, m); err != nil {
		return err
	}
	fmt.Printf("admin: added member %d (raft %s, admin %s)\n", m.ID, m.RaftAddr, m.AdminAddr)
	return nil
}

func runAdminRemoveMember(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("admin remove-member: want one ID, got %q", c.Args().Slice())
	}
	id, err := strconv.ParseUint(c.Args().First(), 10, 64)
	if err != nil || id == 0 {
		return fmt.Errorf("admin remove-member: ID must be >= 1, got %q", c.Args().First())
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	addr, _, err := primaryAddr(ctx, c.String("addr"))
	if err != nil {
		return err
	}
	if err := ops.RequestRemoveMember(ctx, addr, id); err != nil {
		return err
	}
	fmt.Printf("admin: removed member %d\n", id)
	return nil
}
