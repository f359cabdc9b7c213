package sim

import (
	"fmt"

	"github.com/seqd/seqd/node"
)

// The fencing check. A fast node that delivered past an epoch change's
// cut is flagged (mustDiverge, set by startEpoch, by the epoch change of
// epoch.go and by check on a cut entry). It may still deliver the cut
// entries of the ended epoch from packets in flight, but once it hears of
// the new epoch it must stop with ErrDiverged, and the simulator then
// restarts it as a new process (diverged, epoch.go), which clears the
// flag. A flagged node that delivers anything else carries on past the
// change's cut: the fence in receiver/ let it through. Without this check
// such a node passes, since its next records are the new epoch's real
// ones and match w.log.

// fence checks delivery m of n before check records it (n.delivered and
// n.lastEpoch are still the previous delivery's); false: it failed the run.
func (n *simNode) fence(m *node.Message) bool {
	prevSeq, prevEpoch := n.delivered, n.lastEpoch
	n.lastEpoch = m.Epoch
	if !n.mustDiverge {
		return true
	}
	if _, cut := n.w.cutEntry(m.Epoch, m.Seq); cut {
		return true
	}
	n.w.fail("%s delivered seq %d of epoch %d after seq %d of epoch %d, which the change cut: it had to stop with ErrDiverged",
		n.name, m.Seq, m.Epoch, prevSeq, prevEpoch)
	return false
}

// fenceDone is the end-of-run half: a node still flagged and still running
// never stopped as it had to.
func (n *simNode) fenceDone() error {
	if !n.mustDiverge || n.lost != nil {
		return nil
	}
	return fmt.Errorf("%w: %s is still running at the end after seq %d of epoch %d, which an epoch change cut: it had to stop with ErrDiverged",
		ErrInvariant, n.name, n.delivered, n.lastEpoch)
}
