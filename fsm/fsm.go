package fsm

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// FSM is the raft.FSM of the failover state. Raft calls Apply, Snapshot
// and Restore from its FSM goroutine, one at a time; State may be called
// from any goroutine at any time. FSM publishes each new immutable *State
// through an atomic pointer, so readers never block Raft and never see a
// half-applied command.
type FSM struct {
	state atomic.Pointer[State]
	// notify, when set, gets a token (never blocking) after each Apply
	// and Restore: set by Notify before Raft uses the FSM.
	notify chan<- struct{}
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM holding Initial().
func New() *FSM {
	f := &FSM{}
	f.state.Store(Initial())
	return f
}

// Notify makes the FSM signal ch after each Apply and Restore, without
// ever blocking Raft's FSM goroutine: a send that would block is dropped,
// so give ch a buffer of one and read State after each token (tokens
// coalesce; the State is the newest). The cluster uses it to tell a
// running standby each epoch start as it commits, and to wait, after a
// restart, until the state has caught up with the group. Call it before
// handing the FSM to Raft.
func (f *FSM) Notify(ch chan<- struct{}) { f.notify = ch }

func (f *FSM) changed() {
	if f.notify != nil {
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}
}

// State returns the current state. The value is immutable: keep it as long
// as needed; a later Apply publishes a new one and never changes it.
func (f *FSM) State() *State { return f.state.Load() }

// Apply implements raft.FSM. It decodes the entry and applies it to the
// current state. The response (ApplyFuture.Response) is the *State right
// after the command on success, or an error saying why the command was
// rejected (a rejected command changes only the applied index). Use
// Response to read it.
func (f *FSM) Apply(l *raft.Log) interface{} {
	cur := f.state.Load()
	var (
		next *State
		err  error
	)
	if l.Type != raft.LogCommand {
		err = fmt.Errorf("%w: type %v at index %d", ErrNotCommand, l.Type, l.Index)
		next = cur.withIndex(l.Index)
	} else if cmd, derr := Decode(l.Data); derr != nil {
		err = fmt.Errorf("index %d: %w", l.Index, derr)
		next = cur.withIndex(l.Index)
	} else {
		next, err = cur.Apply(l.Index, cmd)
	}
	f.state.Store(next)
	f.changed()
	if err != nil {
		return err
	}
	return next
}

func (s *State) withIndex(i uint64) *State {
	n := *s
	n.index = i
	return &n
}

// Response interprets an ApplyFuture's Response: the state after the
// command, or the reason it was rejected.
func Response(resp interface{}) (*State, error) {
	switch v := resp.(type) {
	case *State:
		return v, nil
	case error:
		return nil, v
	}
	return nil, fmt.Errorf("fsm: unexpected apply response %T", resp)
}

// Snapshot implements raft.FSM. It captures the current immutable state;
// Persist encodes it on Raft's snapshot goroutine while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return snapshot{f.state.Load()}, nil
}

// Restore implements raft.FSM: it replaces the state with the snapshot's.
// A snapshot that does not decode or breaks an invariant leaves the state
// as it was and returns the error.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxSnapshotBytes+1))
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	s, err := DecodeSnapshot(b)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.state.Store(s)
	f.changed()
	return nil
}

type snapshot struct{ s *State }

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(AppendSnapshot(nil, s.s)); err != nil {
		sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot at index %d: %w", s.s.index, err)
	}
	return sink.Close()
}

func (snapshot) Release() {}
