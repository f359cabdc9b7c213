package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
)

// InstanceConfig says how to run one instance of the service: a Service
// on a node of Account/Instance (hot-hot instances share the account),
// its database, and where to rewind from.
type InstanceConfig struct {
	Account  string
	Instance uint8
	// DB is the database URL (OpenStore): sqlite:PATH or postgres://...
	DB      string
	Service Config
	// Node adjusts the node's configuration (after the instance's own
	// settings: account, a large window, rewind from the flushed seq).
	Node func(*node.Config)
	// Session, when not 0, locks the node onto that session (it stops
	// with node.ErrNewSession on another). A database belongs to the
	// session it was flushed from; the instance cannot tell another
	// session's stream from its own without it.
	Session uint64
	// RewindAddrs are replayers' rewind listeners. Without one, the node
	// repairs from the sequencer's ring only.
	RewindAddrs []string
}

// Instance is a Service on its node and its Store.
type Instance struct {
	Service *Service
	Node    *node.Node
	Store   *SQLStore
	client  transport.Client
}

// StartInstance opens the database, loads it, and builds the node that
// rewinds from the flushed seq + 1. Run it with Run. It takes client
// (closed by Run).
func StartInstance(ctx context.Context, cfg InstanceConfig, client transport.Client) (*Instance, error) {
	st, err := OpenStore(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	svc, err := NewService(ctx, cfg.Service, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	ncfg := node.DefaultConfig()
	ncfg.Account, ncfg.Instance = cfg.Account, cfg.Instance
	// A reply per transaction, sent from the handler (TrySend): room for
	// every reply of a burst the stream delivers in one go.
	ncfg.Window = 1 << 16
	ncfg.Session = cfg.Session
	ncfg.Commit(svc.Resume()) // a new database: from seq 1
	if cfg.Node != nil {
		cfg.Node(&ncfg)
	}
	n, err := node.New(ncfg, svc, client)
	if err != nil {
		_ = svc.Close()
		st.Close()
		return nil, fmt.Errorf("inventory: instance %s/%d: %w", cfg.Account, cfg.Instance, err)
	}
	if len(cfg.RewindAddrs) > 0 {
		n.SetRewindAddr(cfg.RewindAddrs...)
	}
	svc.Attach(n)
	return &Instance{Service: svc, Node: n, Store: st, client: client}, nil
}

// Run runs the node until ctx ends or it fails, then flushes the state
// and closes the database and the client. A context that ended is not an
// error.
func (in *Instance) Run(ctx context.Context) error {
	// A database that fails stops the instance (the state in memory would
	// run ahead of anything a restart can recover): the database keeps
	// the last seq it committed, and a restart rewinds from there.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-t.C:
				if in.Service.flusher.Err() != nil {
					cancel()
					return
				}
			}
		}
	}()
	err := in.Node.Run(rctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	in.client.Close()
	return errors.Join(err, in.Service.Close(), in.Store.Close())
}

// Abandon stops without the last flush, as a crash would, after the
// node's Run returned: the database keeps what the Flusher committed.
func (in *Instance) Abandon() {
	in.client.Close()
	_ = in.Service.flusher.Close(nil) // the batch being written, if any, commits or not

	in.Store.Close()
}
