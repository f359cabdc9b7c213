package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops"
)

// `seqd admin activate` and `seqd admin force-passive`: hot-hot
// activation changes, carried out by the primary in the stream.
func adminActivationCommands(addr, timeout cli.Flag) []*cli.Command {
	cmd := func(name, usage string) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			Flags:     []cli.Flag{addr, timeout},
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
	p, _, err := primaryAddr(ctx, c.String("addr"))
	if err != nil {
		return err
	}
	a, err := ops.RequestActivation(ctx, p, op, c.Args().Get(0), uint8(inst))
	if err != nil {
		return err
	}
	fmt.Printf("admin %s: account=%s instance=%d seq=%d\n", op, a.Account, a.Instance, a.Seq)
	return nil
}

// printPairs lists the hot-hot accounts the primary holds (after the
// members in `seqd admin status`), if any: each instance, the active one
// marked.
func printPairs(ctx context.Context, addr string) error {
	p, _, err := primaryAddr(ctx, addr)
	if err != nil {
		return err
	}
	ps, err := ops.FetchPairs(ctx, p)
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
