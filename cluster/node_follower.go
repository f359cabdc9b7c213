package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seqd/seqd/fsm"
)

// followers runs the member's standby, one at a time: from start until a
// lead stops it to take over its store, and again (a new one on the same
// directory) when the primacy ends. A follower that fails by itself
// reports on errc, and the Node's Run returns the error: a member that
// cannot follow the stream must not stay in the group looking healthy.
type followers struct {
	n      *Node
	errc   chan error
	mu     sync.Mutex // guards the fields below
	cur    Follower
	cancel context.CancelFunc
	done   chan struct{}
}

func newFollowers(n *Node) *followers {
	return &followers{n: n, errc: make(chan error, 1)}
}

// get returns the running follower, or nil while the member is primary.
func (fr *followers) get() Follower {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.cur
}

// start opens and runs a follower unless one runs.
func (fr *followers) start(ctx context.Context) error {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.cur != nil {
		return nil
	}
	f, err := fr.n.deps.NewFollower()
	if err != nil {
		return fmt.Errorf("cluster: open the standby: %w", err)
	}
	if k, ok := f.(EpochKnower); ok {
		knowEpochs(k, fr.n.fsm.State())
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	fr.cur, fr.cancel, fr.done = f, cancel, done
	go func() {
		defer close(done)
		if err := f.Run(fctx); err != nil && fctx.Err() == nil {
			select {
			case fr.errc <- fmt.Errorf("cluster: standby: %w", err):
			default:
			}
		}
	}()
	return nil
}

// stop ends the running follower and returns it (nil when none ran), for
// its Takeover.
func (fr *followers) stop() Follower {
	fr.mu.Lock()
	f, cancel, done := fr.cur, fr.cancel, fr.done
	fr.cur, fr.cancel, fr.done = nil, nil, nil
	fr.mu.Unlock()
	if f != nil {
		cancel()
		if w, ok := f.(interface{ Wake() }); ok {
			// A standby blocked in Poll (up to its keepalive) sees the
			// cancellation at once: the new primary waits for it.
			w.Wake()
		}
		<-done
	}
	return f
}

// errNotFollowing: a seal reached a member that runs no standby (it is
// primary, or between roles).
var errNotFollowing = errors.New("cluster: this member runs no standby now (it is primary)")

// seal seals this member's standby and returns what it holds and the
// epoch of its newest held record (0 when the follower cannot tell).
func (fr *followers) seal(epoch uint32) (uint64, uint32, error) {
	f := fr.get()
	if f == nil {
		return 0, 0, errNotFollowing
	}
	c, err := f.Seal(epoch)
	if err != nil {
		return 0, 0, err
	}
	var held uint32
	if h, ok := f.(HeldEpocher); ok {
		held = h.HeldEpoch()
	}
	return c, held, nil
}

// knowEpochs tells k where every epoch of st's session began: epoch e+1
// at the cut of e plus one, and the current epoch at its start (1 when
// the session began inside it). Cuts of older sessions number another
// sequence and are left out.
func knowEpochs(k EpochKnower, st *fsm.State) {
	if st.Session() == 0 {
		return
	}
	for _, c := range st.Cuts() {
		if c.Session == st.Session() && c.Epoch < uint64(^uint32(0)) {
			k.KnowEpoch(uint32(c.Epoch+1), c.Last+1)
		}
	}
	if e := st.Epoch(); e != 0 && e <= uint64(^uint32(0)) {
		k.KnowEpoch(uint32(e), st.EpochStart())
	}
}

// The standby the Node runs heals its stale tail and reports its epoch.
var (
	_ EpochKnower = (*Standby)(nil)
	_ HeldEpocher = (*Standby)(nil)
)
