package adminnode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seqd/seqd/ops/page"
)

// help is the console grammar, one command per line (the telnet console
// and POST /v1/command read the same).
const help = `help                   this list
list                   every process gossip shows
status                 primary, epoch, stable, rates and each member
members                each sequencer member
replayers              each replayer and its range
pairs                  hot-hot pairs
elections              recent elections and their durations
transfer-primary [ID]  hand the primary role to member ID (none: any standby)
quit                   end the session (telnet)
`

// ErrUnknownCommand: a console line names no command; the error says
// what there is.
var ErrUnknownCommand = errors.New("adminnode: unknown command")

// Console runs console commands over a Deployment.
type Console struct {
	d      *Deployment
	status func(ctx context.Context) page.Status
}

// NewConsole is the console of d; status gives the deployment's Status
// (the page Handler's, so elections seen by either are shared).
func NewConsole(d *Deployment, status func(ctx context.Context) page.Status) *Console {
	return &Console{d: d, status: status}
}

// Exec runs one command line and returns its answer (text, lines
// ending in "\n").
func (c *Console) Exec(ctx context.Context, line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", nil
	}
	var b strings.Builder
	switch f[0] {
	case "help":
		b.WriteString(help)
	case "list":
		for _, r := range c.d.Processes() {
			fmt.Fprintf(&b, "%-28s %-9s %-21s %s\n", r[0], r[1], r[2], r[3])
		}
		if b.Len() == 0 {
			b.WriteString("gossip shows no process\n")
		}
	case "status":
		s := c.status(ctx)
		primary := "none"
		if s.Primary != 0 {
			primary = strconv.FormatUint(s.Primary, 10)
		}
		fmt.Fprintf(&b, "primary=%s epoch=%d stable=%d published=%d stable_per_sec=%.0f session=%x healthy=%t\n",
			primary, s.Epoch, s.Stable, s.Published, s.Rates.StablePerSec, s.Session, !s.Unhealthy)
		writeMembers(&b, s)
		for _, e := range s.Errors {
			fmt.Fprintf(&b, "problem: %s\n", e)
		}
	case "members":
		writeMembers(&b, c.status(ctx))
	case "replayers":
		rs := c.d.Replayers()
		for _, r := range rs {
			fmt.Fprintf(&b, "%s tier=%d session=%x holds=%d..%d rewind=%s nak=%s load=%d\n", r.Name, r.Tier, r.Session, r.Lowest, r.Highest, r.RewindAddr, r.NAKAddr, r.Load)
		}
		if len(rs) == 0 {
			b.WriteString("gossip shows no replayer\n")
		}
	case "pairs":
		s := c.status(ctx)
		for _, p := range s.Pairs {
			fmt.Fprintf(&b, "%s active=%d instances=%v\n", p.Account, p.Active, p.Instances)
		}
		if len(s.Pairs) == 0 {
			b.WriteString("no hot-hot pairs\n")
		}
	case "elections":
		s := c.status(ctx)
		for _, e := range s.Elections {
			fmt.Fprintf(&b, "epoch=%d primary=%d cut=%d seal_ms=%.1f first_record_ms=%.1f\n", e.Epoch, e.Primary, e.Cut, float64(e.SealUS)/1e3, float64(e.StartedUS)/1e3)
		}
		if len(s.Elections) == 0 {
			b.WriteString("no election seen yet\n")
		}
	case "transfer-primary":
		var to uint64
		if len(f) > 1 {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil || n == 0 {
				return "", fmt.Errorf("transfer-primary %q: want a member id (>= 1), or none for any standby", f[1])
			}
			to = n
		}
		s := c.status(ctx)
		if s.Primary == 0 {
			return "", errors.New("transfer-primary: the group has no primary now")
		}
		var addr string
		for _, m := range s.Members {
			if m.ID == s.Primary {
				addr = m.AdminAddr
			}
		}
		h, err := c.d.client().RequestTransfer(ctx, addr, to)
		if err != nil {
			return "", fmt.Errorf("transfer-primary: member %d (%s): %w", s.Primary, addr, err)
		}
		fmt.Fprintf(&b, "primary %d -> %d: epoch %d from seq %d, paused %.1f ms\n", h.From, h.To, h.Epoch, h.Cut+1, float64(h.PauseUS)/1e3)
	default:
		return "", fmt.Errorf("%w %q: try help (%s)", ErrUnknownCommand, f[0], "list, status, members, replayers, pairs, elections, transfer-primary")
	}
	return b.String(), nil
}

func writeMembers(b *strings.Builder, s page.Status) {
	for _, m := range s.Members {
		if m.Error != "" {
			fmt.Fprintf(b, "member %d %s admin=%s: %s\n", m.ID, m.Role, m.AdminAddr, m.Error)
			continue
		}
		fmt.Fprintf(b, "member %d %s raft=%s term=%d epoch=%d holds=%d admin=%s\n", m.ID, m.Role, m.RaftState, m.Term, m.Epoch, m.Contiguous, m.AdminAddr)
	}
	if len(s.Members) == 0 {
		b.WriteString("no sequencer member found\n")
	}
}
