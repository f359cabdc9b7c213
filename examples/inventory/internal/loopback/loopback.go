// Package loopback runs a real seqd sequencer and replayer in this
// process on loopback TCP, for the hot deal and the inventory tests: a
// sequencer.Agent on a tcp.Server, every data packet it publishes
// appended to a replayer.Store (as an in-process replayer would), and a
// replayer.RewindServer on the store, so a restarted node rewinds from
// any seq.
//
// Concurrency: Start runs the agent on a goroutine of its own; the store
// is written on the agent's goroutine only; Close stops everything.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// Stack is a running sequencer and replayer.
type Stack struct {
	TCP    tcp.Config // what clients dial
	Agent  *sequencer.Agent
	store  *replayer.Store
	rw     *replayer.RewindServer
	l      net.Listener
	srv    *tcp.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr atomic.Pointer[error]
	tapErr atomic.Pointer[error]
}

// tap appends each data packet to the store and ticks it at heartbeats
// and every 32 packets, so that the rewind server sees them.
type tap struct {
	transport.Server
	st    *Stack
	n     int
	start time.Time
}

func (t *tap) Publish(frame []byte) error {
	if k, _ := wire.PeekKind(frame); k == wire.KindData {
		if err := t.st.store.Append(frame); err != nil {
			t.st.tapErr.CompareAndSwap(nil, &err)
		}
		t.n++
	}
	if k, _ := wire.PeekKind(frame); k == wire.KindHeartbeat || t.n%32 == 0 {
		if err := t.st.store.Tick(int64(time.Since(t.start))); err != nil {
			t.st.tapErr.CompareAndSwap(nil, &err)
		}
	}
	return t.Server.Publish(frame)
}

// Start starts a sequencer of session on a free loopback port, its
// stream stored under dir.
func Start(ctx context.Context, dir string, session uint64) (*Stack, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	st := &Stack{TCP: tcp.DefaultConfig()}
	st.TCP.Addr = addr
	if st.srv, err = tcp.NewServer(st.TCP); err != nil {
		return nil, err
	}
	rcfg := replayer.DefaultConfig()
	rcfg.Sync = replayer.SyncNone // the test's process is the only reader
	if st.store, _, err = replayer.Open(dir, rcfg); err != nil {
		st.srv.Close()
		return nil, err
	}
	qcfg := sequencer.DefaultConfig()
	qcfg.Session, qcfg.Epoch = session, 1
	if st.Agent, err = sequencer.NewAgent(qcfg, &tap{Server: st.srv, st: st, start: time.Now()}, sequencer.SystemClock()); err != nil {
		st.close()
		return nil, err
	}
	if st.rw, err = replayer.NewRewindServer(st.store.Tip(), replayer.DefaultRewindConfig()); err != nil {
		st.close()
		return nil, err
	}
	if st.l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		st.close()
		return nil, err
	}
	go st.rw.Serve(st.l)
	var runCtx context.Context
	runCtx, st.cancel = context.WithCancel(ctx)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		if err := st.Agent.Run(runCtx); !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("loopback: sequencer: %w", err)
			st.runErr.Store(&err)
		}
	}()
	return st, nil
}

// Client dials the sequencer.
func (st *Stack) Client() (transport.Client, error) { return tcp.Dial(st.TCP) }

// RewindAddr is the replayer's rewind listener.
func (st *Stack) RewindAddr() string { return st.l.Addr().String() }

// LastSeq is the last seq the sequencer published.
func (st *Stack) LastSeq() uint64 { return st.Agent.LastSeq() }

// Err reports a failure of the sequencer or the store.
func (st *Stack) Err() error {
	if p := st.tapErr.Load(); p != nil {
		return *p
	}
	if p := st.runErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops the sequencer and the replayer.
func (st *Stack) Close() error {
	if st.cancel != nil {
		st.cancel()
	}
	st.wg.Wait()
	st.close()
	return st.Err()
}

func (st *Stack) close() {
	if st.rw != nil {
		st.rw.Close()
	}
	if st.l != nil {
		st.l.Close()
	}
	st.srv.Close()
	st.store.Close()
}
