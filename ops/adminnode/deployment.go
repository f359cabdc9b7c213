package adminnode

import (
	"context"
	"slices"
	"strconv"

	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/page"
	"github.com/seqd/seqd/tiered"
)

// Directory lists a deployment's processes: *tiered.Agent (gossip) is
// one.
type Directory interface {
	Members() []tiered.Member
}

// Deployment is the whole deployment as gossip shows it: the sequencer
// members (through their admin endpoints), the replayers and their
// ranges, and every other process that gossips.
type Deployment struct {
	dir    Directory
	static []string
	cl     page.Cluster
}

// NewDeployment reads dir; static are admin addresses of sequencer
// members to ask too (for members that do not gossip).
func NewDeployment(dir Directory, static []string) *Deployment {
	d := &Deployment{dir: dir, static: static}
	d.cl = page.Cluster{Name: "admin node", Seeds: d.AdminAddrs, Replayers: d.Replayers, Extra: d.extra}
	return d
}

// WithClient makes d ask the members with c (a token, a certificate)
// instead of ops.DefaultClient; it returns d.
func (d *Deployment) WithClient(c *ops.Client) *Deployment {
	d.cl.Client = c
	return d
}

// client is what d asks the members with.
func (d *Deployment) client() *ops.Client {
	if d.cl.Client == nil {
		return ops.DefaultClient
	}
	return d.cl.Client
}

// AdminAddrs are the admin endpoints of the sequencer members gossip
// shows, then the static ones, without repeats.
func (d *Deployment) AdminAddrs() []string {
	var out []string
	if d.dir != nil {
		for _, m := range d.dir.Members() {
			if m.Err == nil && m.Meta.Role == tiered.RoleSequencer && m.Meta.AdminAddr != "" && !slices.Contains(out, m.Meta.AdminAddr) {
				out = append(out, m.Meta.AdminAddr)
			}
		}
	}
	for _, a := range d.static {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Replayers are the replayers gossip shows, with their ranges.
func (d *Deployment) Replayers() []page.Replayer {
	out := []page.Replayer{}
	if d.dir == nil {
		return out
	}
	for _, m := range d.dir.Members() {
		if m.Err != nil || m.Meta.Role != tiered.RoleReplayer {
			continue
		}
		x := m.Meta
		out = append(out, page.Replayer{Name: x.Name, Tier: x.Tier, Session: x.Session, Lowest: x.Lowest, Highest: x.Highest,
			RewindAddr: x.RewindAddr, NAKAddr: x.NAKAddr, Load: x.Load})
	}
	return out
}

// Processes is every process gossip shows: name, role, gossip address,
// admin address (or the reason its meta did not decode).
func (d *Deployment) Processes() [][]string {
	var rows [][]string
	if d.dir == nil {
		return rows
	}
	for _, m := range d.dir.Members() {
		if m.Err != nil {
			rows = append(rows, []string{m.Name, "?", m.Addr, m.Err.Error()})
			continue
		}
		extra := m.Meta.AdminAddr
		if m.Meta.Role == tiered.RoleReplayer {
			extra = "tier " + strconv.Itoa(int(m.Meta.Tier)) + " holds " + strconv.FormatUint(m.Meta.Lowest, 10) + ".." + strconv.FormatUint(m.Meta.Highest, 10)
		}
		rows = append(rows, []string{m.Name, m.Meta.Role.String(), m.Addr, extra})
	}
	return rows
}

func (d *Deployment) extra() []page.KeyValues {
	rows := append([][]string{{"name", "role", "gossip", "admin / range"}}, d.Processes()...)
	return []page.KeyValues{{Title: "Processes (gossip)", Rows: rows}}
}

// Source is the page's view of the deployment.
func (d *Deployment) Source() page.Source { return &d.cl }

// Status gathers the deployment now.
func (d *Deployment) Status(ctx context.Context) page.Status { return d.cl.Gather(ctx) }
