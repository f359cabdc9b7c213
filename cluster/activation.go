package cluster

import (
	"context"

	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/wire"
)

// Activation carries out an operator's hot-hot activation change on the
// primary: op is wire.ControlActivate or wire.ControlForcePassive for
// instance of account a. The change is records in the stream, decided by
// the primary's Core between two turns of its loop (sequencer.Controls),
// so every node and every later replay sees the same switch at the same
// seq. It returns the seq of the activation record; a standby answers
// ErrNotPrimary.
func (n *Member) Activation(ctx context.Context, op uint8, a wire.Account, instance uint8) (uint64, error) {
	if n.Role() != RolePrimary {
		return 0, n.notPrimary()
	}
	return n.controls.Do(ctx, op, a, instance, n.wakePrimary)
}

// HotHotPairs lists the hot-hot accounts as the primary's stream-derived
// state holds them (for `seqd admin status`); a standby answers
// ErrNotPrimary.
func (n *Member) HotHotPairs(ctx context.Context) ([]ops.Pair, error) {
	if n.Role() != RolePrimary {
		return nil, n.notPrimary()
	}
	ps, err := n.controls.Pairs(ctx, n.wakePrimary)
	if err != nil {
		return nil, err
	}
	out := make([]ops.Pair, 0, len(ps))
	for _, p := range ps {
		op := ops.Pair{Account: p.Account.String(), Active: p.Active, LastID: p.LastID}
		for _, in := range p.Instances {
			op.Instances = append(op.Instances, ops.PairInstance{Instance: in.Instance, Incarnation: in.Incarnation, LastSeq: in.LastSeq})
		}
		out = append(out, op)
	}
	return out, nil
}
