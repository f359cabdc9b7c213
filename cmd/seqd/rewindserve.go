package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"github.com/seqd/seqd/replayer"
)

func init() { rewindServe = serveRewinds }

// rewindSrv is the process's rewind server once it serves, for the
// admin surface's metrics (rewindStats).
var rewindSrv atomic.Pointer[replayer.RewindServer]

// rewindStats are the rewind server's counters (zero before it serves).
func rewindStats() replayer.RewindStats {
	if s := rewindSrv.Load(); s != nil {
		return s.Stats()
	}
	return replayer.RewindStats{}
}

// serveRewinds is `seqd replayer --rewind-addr`: a RewindServer on addr
// reading the service's store through its Tip (each rewind with a Reader
// of its own, never the Store itself) until ctx ends.
func serveRewinds(ctx context.Context, svc *replayer.Service, addr string, log *slog.Logger) error {
	var tip *replayer.Tip
	if err := svc.Do(ctx, func(s *replayer.Store) { tip = s.Tip() }); err != nil {
		return err
	}
	srv, err := replayer.NewRewindServer(tip, replayer.DefaultRewindConfig())
	if err != nil {
		return err
	}
	rewindSrv.Store(srv)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("rewind-addr %s: %w", addr, err)
	}
	return serveRewindsOn(ctx, srv, l, log)
}

// listenRewind binds --rewind-addr before the replayer says ready: a
// port in use is an error at start, not after the ready line.
func listenRewind(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rewind-addr %s: %w", addr, err)
	}
	return l, nil
}

// serveRewindsOn serves rewinds on l (bound by listenRewind) until ctx
// ends.
func serveRewindsOnStore(ctx context.Context, svc *replayer.Service, l net.Listener, log *slog.Logger) error {
	var tip *replayer.Tip
	if err := svc.Do(ctx, func(s *replayer.Store) { tip = s.Tip() }); err != nil {
		return err
	}
	srv, err := replayer.NewRewindServer(tip, replayer.DefaultRewindConfig())
	if err != nil {
		return err
	}
	return serveRewindsOn(ctx, srv, l, log)
}

func serveRewindsOn(ctx context.Context, srv *replayer.RewindServer, l net.Listener, log *slog.Logger) error {
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("replayer serving rewinds", "rewind_addr", l.Addr().String())
	return srv.Serve(l)
}
