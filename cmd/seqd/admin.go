package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
)

// Exit statuses of `seqd admin status` and `seqd admin wait-ready`, for
// health checks (docs/ops.md, "Exit codes"); 1 (exitError) is an error:
// bad arguments, or no admin address answered.
const (
	exitDegraded = 3 // status: a primary serves, and a member does not answer or is not ready
	exitDown     = 4 // status: no primary, or no quorum answers; wait-ready: not ready in time
)

// defaultAdminAddrs are the admin addresses of the README's three-member
// example: `seqd admin` asks them in turn when --addr is not given.
const defaultAdminAddrs = "127.0.0.1:7401,127.0.0.1:7402,127.0.0.1:7403"

// adminCommand talks to the admin surface of seqd processes (cluster
// members, and any process started with --admin-addr), loopback by
// default.
func adminCommand() *cli.Command {
	addr := &cli.StringFlag{Name: "addr", Value: defaultAdminAddrs, Usage: "admin endpoint(s) to ask, comma-separated, the first that answers is used (a member's --admin-addr, or any process's)", EnvVars: []string{"SEQD_ADMIN_ADDR"}}
	timeout := &cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}
	token := &cli.StringFlag{Name: "token", Usage: "admin token, needed for an endpoint off loopback", EnvVars: []string{ops.TokenEnv}}
	flags := append([]cli.Flag{addr, timeout, token}, tlsFlags()...)
	return &cli.Command{
		Name:  "admin",
		Usage: "administer seqd processes: status, wait-ready, exec, transfer-primary, add-member, remove-member, activate, force-passive",
		Subcommands: append([]*cli.Command{
			{
				Name:  "status",
				Usage: "members, roles, epoch, primary, stable, lag and readiness of a sequencer cluster (or the status of any other seqd process)",
				Description: `Exit status: 0 a primary serves and every member answers and is ready;
3 a primary serves but a member does not answer or is not ready (catching up);
4 no primary, or no quorum of members answers; 1 an error (nothing answered).
A member that knows no members yet (catching up after a restart) says so,
exit 3. Asked of another process (a replayer, a node, a tail, a standalone
sequencer: its --admin-addr), prints its status: 0 ready, 3 not ready.

Example:
   seqd admin status --addr 127.0.0.1:7401`,
				Flags:     append(append([]cli.Flag{}, flags...), gossipFlags(false)...),
				Action:    runAdminStatus,
				ArgsUsage: " ",
			},
			{
				Name:  "wait-ready",
				Usage: "wait until the process at --addr is ready (its /readyz), or exit 4 at --timeout with the reason",
				Description: `Ready means: a cluster member knows the primary and holds within 1024 seqs
of what it published (the primary: it sequences); a replayer holds up to the
stable seq it has seen; a node has finished rewinding.

Example:
   seqd admin wait-ready --addr 127.0.0.1:7402 --timeout 60s`,
				Flags:     flags,
				Action:    runAdminWaitReady,
				ArgsUsage: " ",
			},
			{
				Name:  "exec",
				Usage: "run one command of the admin command language (as on the console) and print its answer",
				Description: `The words after exec are one command line: help, list, status, members,
transfer-primary [ID], add-member SPEC, remove-member ID, replayers, pairs,
node NAME status|open|close|ACTION, and what the process adds.

Example:
   seqd admin exec --addr 127.0.0.1:7401 help`,
				Flags:     flags,
				ArgsUsage: "COMMAND [ARGS...]",
				// "help" is the language's, not urfave's.
				HideHelpCommand: true,
				Action:          runAdminExec,
			},
			{
				Name:  "transfer-primary",
				Usage: "hand the primary role to member TO (default: the standby raft picks) with nothing lost",
				Description: `Asks the primary to stop taking commands, wait until its standbys hold
what it published, and transfer the Raft leadership; the new primary seals,
takes over at the cut and begins the next epoch. Prints the new primary,
epoch and cut, and the pause (the old primary's last loop to the new one's
first record). TO that is the primary already changes nothing (exit 0).

Example:
   seqd admin transfer-primary --addr 127.0.0.1:7401 3`,
				Flags:     flags,
				ArgsUsage: "[TO]",
				Action:    runAdminTransfer,
			},
			{
				Name:      "add-member",
				Usage:     "add a voter, live (start it first with --join and the full member list)",
				Flags:     flags,
				ArgsUsage: "ID@RAFT@ADMIN@PEER",
				Action:    runAdminAddMember,
			},
			{
				Name:      "remove-member",
				Usage:     "remove a member, live (not the primary: transfer the role first; never below three voters: add the replacement first)",
				Flags:     flags,
				ArgsUsage: "ID",
				Action:    runAdminRemoveMember,
			},
		}, adminActivationCommands(flags)...),
	}
}

func adminCtx(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, c.Duration("timeout"))
}

// adminClient asks with --token and, given the security.tls-* keys, over
// TLS with that certificate (an admin-* one is an operator's).
func adminClient(c *cli.Context) (*ops.Client, error) {
	cl := &ops.Client{Token: c.String("token")}
	id, err := tlsIdentity(c)
	if err != nil {
		return nil, err
	}
	if id != nil {
		cl.TLS = id.Client(nil)
	}
	return cl, nil
}

// adminAddrs are the addresses --addr lists.
func adminAddrs(c *cli.Context) []string {
	var out []string
	for _, a := range strings.Split(c.String("addr"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// firstProcess asks the --addr addresses in turn for their status and
// returns the first answer; the error names every address tried.
func firstProcess(ctx context.Context, cl *ops.Client, addrs []string) (string, ops.ProcessStatus, error) {
	var errs []string
	for _, a := range addrs {
		st, err := cl.FetchProcess(ctx, a)
		if err == nil {
			return a, st, nil
		}
		errs = append(errs, err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	return "", ops.ProcessStatus{}, fmt.Errorf("admin: no admin endpoint answered (%s); give one with --addr", strings.Join(errs, "; "))
}

// firstMember asks the --addr addresses in turn for a member's status
// and returns the first answer; the error names every address tried.
func firstMember(ctx context.Context, cl *ops.Client, addrs []string) (string, ops.MemberStatus, error) {
	var errs []string
	for _, a := range addrs {
		st, err := cl.FetchStatus(ctx, a)
		if err == nil {
			return a, st, nil
		}
		errs = append(errs, err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	return "", ops.MemberStatus{}, fmt.Errorf("admin: no cluster member answered (%s); give a member's admin address with --addr", strings.Join(errs, "; "))
}

// primaryAddr finds the admin endpoint of the primary, starting from the
// --addr addresses: the member the one that answered names as primary,
// when it answers so itself.
func primaryAddr(ctx context.Context, cl *ops.Client, addrs []string) (string, ops.MemberStatus, error) {
	addr, st, err := firstMember(ctx, cl, addrs)
	if err != nil {
		return "", st, err
	}
	if st.Primary == 0 {
		return "", st, fmt.Errorf("admin: member %d at %s knows no primary (epoch %d, raft %s): the cluster has no quorum, or is electing", st.ID, addr, st.Epoch, st.RaftState)
	}
	if st.Primary == st.ID {
		return addr, st, nil
	}
	for _, m := range st.Members {
		if m.ID == st.Primary {
			return m.AdminAddr, st, nil
		}
	}
	return "", st, fmt.Errorf("admin: the primary %d is not among the members %s knows", st.Primary, addr)
}

// clusterView is what `admin status` found: each member's answer and
// readiness, and the primary they confirm.
type clusterView struct {
	head    ops.MemberStatus // the newest view among the answers (highest epoch, then term)
	all     []ops.MemberAnswer
	ready   []error
	primary uint64 // the member that answers as primary of head's epoch (0: none)
}

func viewCluster(ctx context.Context, cl *ops.Client, first ops.MemberStatus) clusterView {
	v := clusterView{head: first, all: cl.FetchAll(ctx, first)}
	v.ready = make([]error, len(v.all))
	for i, a := range v.all {
		if a.Err != nil {
			continue
		}
		st := a.Status
		if st.Epoch > v.head.Epoch || (st.Epoch == v.head.Epoch && st.Term > v.head.Term) {
			v.head = st
		}
		v.ready[i] = cl.Ready(ctx, a.Member.AdminAddr)
	}
	for _, a := range v.all {
		if a.Err == nil && a.Status.Role == "primary" && a.Status.Epoch == v.head.Epoch {
			v.primary = a.Status.ID
		}
	}
	return v
}

// verdict is the exit status of a view, and the words for it.
func (v clusterView) verdict() (int, string) {
	answered, voters := 0, 0
	allReady := true
	for i, a := range v.all {
		if a.Member.Role != fsm.Nonvoter.String() {
			voters++
		}
		if a.Err != nil {
			allReady = false
			continue
		}
		if a.Member.Role != fsm.Nonvoter.String() {
			answered++
		}
		if v.ready[i] != nil {
			allReady = false
		}
	}
	switch {
	case v.primary == 0:
		return exitDown, "down: no member answers as primary"
	case answered < voters/2+1:
		return exitDown, fmt.Sprintf("down: %d of %d voters answer, fewer than a quorum", answered, voters)
	case !allReady:
		return exitDegraded, "degraded: a member does not answer or is not ready"
	}
	return 0, "ok"
}

func runAdminStatus(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("admin status", c.Args().Slice())
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	addr, ps, err := firstProcess(ctx, cl, adminAddrs(c))
	if err != nil {
		return err
	}
	if ps.Member == nil {
		// Another kind of process: its status, and whether it is ready.
		return processStatus(addr, ps)
	}
	if m := ps.Member; len(m.Members) == 0 {
		// A member restarted on an empty or a lagging Raft log: it
		// knows no members until it catches up with the leader.
		fmt.Printf("member %d at %s is catching up: its failover state holds no members yet (raft %s, term %d); ask another member with --addr\n", m.ID, addr, m.RaftState, m.Term)
		return &codedError{code: exitDegraded, err: fmt.Errorf("admin status: member %d is catching up", m.ID)}
	}
	v := viewCluster(ctx, cl, *ps.Member)
	code, words := v.verdict()
	printView(os.Stdout, v, words)
	if err := printPairs(ctx, c); err != nil {
		return err
	}
	if code != 0 {
		return &codedError{code: code, err: fmt.Errorf("admin status: %s", words)}
	}
	return nil
}

// processStatus prints the status of a process that is no cluster
// member; exit 0 when ready, 3 (exitDegraded) when not.
func processStatus(addr string, ps ops.ProcessStatus) error {
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("%s %s at %s: ready=%v\n%s\n", ps.Process, ps.Name, addr, ps.Ready, b)
	if !ps.Ready {
		return &codedError{code: exitDegraded, err: fmt.Errorf("admin status: %s at %s is not ready: %s", ps.Process, addr, strings.TrimPrefix(ps.Reason, ops.ErrNotReady.Error()+": "))}
	}
	return nil
}

func printView(out io.Writer, v clusterView, words string) {
	var published uint64
	for _, s := range v.all {
		if s.Err == nil && s.Status.ID == v.primary {
			published = s.Status.Published
		}
	}
	primary := "none"
	if v.primary != 0 {
		primary = strconv.FormatUint(v.primary, 10)
	}
	fmt.Fprintf(out, "session=%d epoch=%d primary=%s epoch_start=%d members=%d cluster=%s\n", v.head.Session, v.head.Epoch, primary, v.head.EpochStart, len(v.head.Members), words)
	w := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tRAFT\tTERM\tEPOCH\tSTABLE\tPUBLISHED\tHELD\tLAG\tREADY\tADMIN")
	var notes []string
	for i, s := range v.all {
		if s.Err != nil {
			fmt.Fprintf(w, "%d\tunreachable\t-\t-\t-\t-\t-\t-\t-\tno\t%s\n", s.Member.ID, s.Member.AdminAddr)
			notes = append(notes, fmt.Sprintf("member %d unreachable: %s", s.Member.ID, trimSentinel(s.Err)))
			continue
		}
		st := s.Status
		lag := "-"
		if published > 0 && st.Contiguous <= published {
			lag = strconv.FormatUint(published-st.Contiguous, 10)
		}
		ready := "yes"
		if err := v.ready[i]; err != nil {
			ready = "no"
			notes = append(notes, fmt.Sprintf("member %d not ready: %s", st.ID, trimSentinel(err)))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", st.ID, st.Role, st.RaftState, st.Term, st.Epoch,
			dash(st.Stable), dash(st.Published), st.Contiguous, lag, ready, s.Member.AdminAddr)
	}
	_ = w.Flush()
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
}

// trimSentinel is err's text without the leading "ops: not ready: ",
// "ops: unreachable: " a table cell need not repeat.
func trimSentinel(err error) string {
	s := err.Error()
	for _, k := range []error{ops.ErrNotReady, ops.ErrUnreachable} {
		if errors.Is(err, k) {
			s = strings.TrimPrefix(s, k.Error()+": ")
		}
	}
	return s
}

func dash(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

func runAdminWaitReady(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("admin wait-ready", c.Args().Slice())
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	addrs := adminAddrs(c)
	if len(addrs) != 1 {
		return fmt.Errorf("admin wait-ready: give one --addr (the process to wait for), got %q", c.String("addr"))
	}
	t0 := time.Now()
	var last error
	for {
		last = cl.Ready(ctx, addrs[0])
		if last == nil {
			fmt.Printf("admin: %s ready after %.1fs\n", addrs[0], time.Since(t0).Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return &codedError{code: exitDown, err: fmt.Errorf("admin wait-ready: %s not ready after %v: %s", addrs[0], c.Duration("timeout"), trimSentinel(last))}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func runAdminExec(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("admin exec: want a command line (try: seqd admin exec help)")
	}
	ctx, cancel := adminCtx(c)
	defer cancel()
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	line := strings.Join(quoteWords(c.Args().Slice()), " ")
	var errs []string
	for _, a := range adminAddrs(c) {
		out, err := cl.Exec(ctx, a, line, nil)
		if errors.Is(err, ops.ErrUnreachable) {
			errs = append(errs, err.Error())
			continue
		}
		if err != nil {
			return err
		}
		fmt.Println(out)
		return nil
	}
	return fmt.Errorf("admin exec: no admin endpoint answered (%s)", strings.Join(errs, "; "))
}

// quoteWords quotes the words that hold blanks or quotes, so that the
// line parses back into the same words.
func quoteWords(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		if w == "" || strings.ContainsAny(w, " \t\"\\") {
			w = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
		}
		out[i] = w
	}
	return out
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
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	addr, st, err := primaryAddr(ctx, cl, adminAddrs(c))
	if err != nil {
		return err
	}
	h, err := cl.RequestTransfer(ctx, addr, to)
	if errors.Is(err, ops.ErrAlreadyPrimary) {
		fmt.Printf("admin: member %d is the primary already (epoch %d): nothing to do\n", to, st.Epoch)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("admin: transferred primary from=%d to=%d epoch=%d cut=%d pause_ms=%.3f\n", h.From, h.To, h.Epoch, h.Cut, float64(h.PauseUS)/1000)
	return nil
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

// parseMember reads ID@RAFT@ADMIN@PEER (ops.ParseMember), with the
// error's text for a flag.
func parseMember(s string) (fsm.Member, error) {
	m, err := ops.ParseMember(s)
	if err != nil {
		return m, errors.New(strings.TrimPrefix(err.Error(), ops.ErrBadArgs.Error()+": "))
	}
	return m, nil
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
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	addr, _, err := primaryAddr(ctx, cl, adminAddrs(c))
	if err != nil {
		return err
	}
	if err := cl.RequestAddMember(ctx, addr, m); err != nil {
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
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	addr, _, err := primaryAddr(ctx, cl, adminAddrs(c))
	if err != nil {
		return err
	}
	if err := cl.RequestRemoveMember(ctx, addr, id); err != nil {
		return err
	}
	fmt.Printf("admin: removed member %d\n", id)
	return nil
}
