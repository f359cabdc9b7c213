package cluster

import (
	"context"

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
