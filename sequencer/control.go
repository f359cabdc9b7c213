package sequencer

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/seqd/seqd/wire"
)

// Controls is a mailbox of operator activation requests (activate,
// force-passive) for a Core that another goroutine runs: Do queues a
// request and waits for its outcome, the Core's goroutine carries the
// queued ones out with Apply between its calls. The zero value is ready.
type Controls struct {
	pending atomic.Bool // a request waits: Apply's check costs one load
	mu      sync.Mutex
	reqs    []*controlReq
}

type controlReq struct {
	op       uint8 // 0: a pairs query
	account  wire.Account
	instance uint8
	done     chan controlResult // buffered: Apply never waits
}

type controlResult struct {
	seq   uint64
	err   error
	pairs []HotHotPair
}

// Pairs returns the hot-hot accounts of the Core's State (read on its
// goroutine by Apply), or ctx's error.
func (m *Controls) Pairs(ctx context.Context, wake func()) ([]HotHotPair, error) {
	res, err := m.submit(ctx, &controlReq{done: make(chan controlResult, 1)}, wake)
	return res.pairs, err
}

// Do asks for op (wire.ControlActivate or wire.ControlForcePassive) on
// instance of account a and returns the seq of the activation record,
// or Core.Activate's and Core.ForcePassive's error; ctx's error when it
// ends first (the request may still be carried out). wake, if set, is
// called once the request is queued (to wake the Core's loop).
func (m *Controls) Do(ctx context.Context, op uint8, a wire.Account, instance uint8, wake func()) (uint64, error) {
	if op != wire.ControlActivate && op != wire.ControlForcePassive {
		return 0, wire.ErrControl
	}
	res, err := m.submit(ctx, &controlReq{op: op, account: a, instance: instance, done: make(chan controlResult, 1)}, wake)
	return res.seq, err
}

func (m *Controls) submit(ctx context.Context, r *controlReq, wake func()) (controlResult, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, r)
	m.pending.Store(true)
	m.mu.Unlock()
	if wake != nil {
		wake()
	}
	select {
	case res := <-r.done:
		return res, res.err
	case <-ctx.Done():
		return controlResult{}, ctx.Err()
	}
}

// Apply carries out the queued requests on c at now (on c's goroutine,
// between its calls; the shell hands the Ready on as after any call).
func (m *Controls) Apply(c *Core, now Time) {
	if !m.pending.Load() {
		return
	}
	m.mu.Lock()
	reqs := m.reqs
	m.reqs = nil
	m.pending.Store(false)
	m.mu.Unlock()
	for _, r := range reqs {
		var res controlResult
		switch r.op {
		case 0:
			res.pairs = c.state.HotHotPairs()
		case wire.ControlActivate:
			res.seq, res.err = c.Activate(now, r.account, r.instance)
		default:
			res.seq, res.err = c.ForcePassive(now, r.account, r.instance)
		}
		r.done <- res
	}
}
