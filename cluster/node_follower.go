package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// seal seals this member's standby.
func (fr *followers) seal(epoch uint32) (uint64, error) {
	f := fr.get()
	if f == nil {
		return 0, errNotFollowing
	}
	return f.Seal(epoch)
}
