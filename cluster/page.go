package cluster

import "github.com/seqd/seqd/ops/page"

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
