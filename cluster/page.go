package cluster

import (
	"context"
	"time"

	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/page"
)

// SetPageReplayers makes the member's status page list the replayers f
// returns (gossip's: the shell sets it once its gossip agent runs);
// safe from any goroutine.
func (n *Member) SetPageReplayers(f func() []page.Replayer) { n.pageReplayers.Store(&f) }

func (n *Member) replayersOnPage() []page.Replayer {
	if f := n.pageReplayers.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// pagePairsTimeout bounds the page's question for the hot-hot pairs (one
// per refresh, shared by every viewer).
const pagePairsTimeout = 500 * time.Millisecond

// pairsOnPage are the hot-hot accounts as the primary's state holds them:
// asked of this member's own loop when it is the primary, else of the
// primary's admin endpoint; none when there is no primary to ask.
func (n *Member) pairsOnPage() []page.Pair {
	ctx, cancel := context.WithTimeout(context.Background(), pagePairsTimeout)
	defer cancel()
	var ps []ops.Pair
	var err error
	if n.Role() == RolePrimary {
		ps, err = n.HotHotPairs(ctx)
	} else {
		st := n.Status()
		addr := ""
		for _, m := range st.Members {
			if m.ID == st.Primary && m.ID != n.cfg.ID {
				addr = m.AdminAddr
			}
		}
		if addr == "" {
			return nil
		}
		ps, err = n.adminClient.FetchPairs(ctx, addr)
	}
	if err != nil {
		return nil
	}
	out := make([]page.Pair, 0, len(ps))
	for _, p := range ps {
		q := page.Pair{Account: p.Account, Instances: []uint64{}}
		if p.Active >= 0 {
			q.Active = uint64(p.Active)
		}
		for _, in := range p.Instances {
			q.Instances = append(q.Instances, uint64(in.Instance))
		}
		out = append(out, q)
	}
	return out
}
