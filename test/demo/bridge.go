package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/seqd/seqd/bridge"
	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
)

// demoBridge carries site A's stream (the demo's groups) to site B (groups
// of its own on loopback) through a bridge pair, one TCP and one UDP
// channel, as `seqd bridge --role send` and `--role receive` would, and
// runs a read-only node at site B whose stream is compared with A's.
type demoBridge struct {
	site multicast.Config // site B's groups
	b    *demoNode
	errs chan error
	// far and near are site B's side (the receiving end, the node) and
	// the sending end: B's side stops first, so that its TCP channel does
	// not see the sending end go.
	far, near       sync.WaitGroup
	stopFar, stopNr context.CancelFunc
	// closers close the sockets once the ends and the node returned.
	closers []func() error
}

// startDemoBridge starts the receiving end (site B), the sending end
// (following site A's stream, repairing from the replayer at nakA) and
// site B's node. serverLock is held while site B's server opens (one
// stream server opens at a time in this process).
func startDemoBridge(ctx context.Context, dir string, a, b multicast.Config, nakA string, serverLock *sync.Mutex, log *slog.Logger) (_ *demoBridge, err error) {
	// Not ctx's children: the demo's end cancels ctx, and close stops
	// the two sides in turn.
	ctx = context.WithoutCancel(ctx)
	farCtx, stopFar := context.WithCancel(ctx)
	nearCtx, stopNr := context.WithCancel(ctx)
	d := &demoBridge{site: b, errs: make(chan error, 3), stopFar: stopFar, stopNr: stopNr}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	tcpAddr, err := freeport.Addr() // the sending end's; the receiving end dials it
	if err != nil {
		return nil, err
	}
	serverLock.Lock()
	site, err := multicast.NewServer(b)
	serverLock.Unlock()
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, site.Close)
	rc := bridge.DefaultConfig()
	rc.Role, rc.Site, rc.Logger = bridge.Receive, "B", log
	rc.TCP, rc.UDP = []string{tcpAddr}, []string{"127.0.0.1:0"}
	rc.Service.Dir = filepath.Join(dir, "receive")
	recv, err := bridge.NewReceiveEnd(rc, site)
	if err != nil {
		return nil, err
	}
	sc := bridge.DefaultConfig()
	sc.Role, sc.Site, sc.Logger = bridge.Send, "A", log
	sc.TCP, sc.UDP = []string{tcpAddr}, recv.UDPAddrs()
	sc.Service.Dir = filepath.Join(dir, "send")
	sc.Service.Sources = []string{nakA}
	ac := a
	ac.FaultStream = 300
	follow, err := multicast.NewClient(ac)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, follow.Close)
	nakAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	nak, err := multicast.NewRepairServer(a, nakAddr)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, nak.Close)
	send, err := bridge.NewSendEnd(sc, follow, nak)
	if err != nil {
		return nil, err
	}

	d.b = newDemoNode("")
	ncfg := node.DefaultConfig()
	ncfg.ReadOnly, ncfg.Rewind = true, true // NAKs go to the receiving end, which answers from its store
	bc := b
	bc.FaultStream = 301
	cl, err := multicast.NewClient(bc)
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, cl.Close)
	if d.b.n, err = node.New(ncfg, d.b, cl); err != nil {
		return nil, err
	}
	run := func(ctx context.Context, wg *sync.WaitGroup, name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				d.errs <- fmt.Errorf("demo: bridge %s: %w", name, err)
			}
		}()
	}
	run(farCtx, &d.far, "receiving end", recv.Run)
	run(nearCtx, &d.near, "sending end", send.Run)
	run(farCtx, &d.far, "site B's node", d.b.n.Run)
	return d, nil
}

// close stops the ends and the node and closes their sockets.
func (d *demoBridge) close() {
	d.stopFar()
	d.far.Wait()
	d.stopNr()
	d.near.Wait()
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// delivered waits (at most wait) until site B's node delivered last and
// says what it holds and whether that is A's stream (digest).
func (d *demoBridge) delivered(last, digest uint64, wait time.Duration) (uint64, bool) {
	until := time.Now().Add(wait)
	for {
		d.b.mu.Lock()
		l, dg, lost, dup := d.b.check.Last, d.b.check.Digest, d.b.check.Lost, d.b.check.Dup
		d.b.mu.Unlock()
		if l >= last || time.Now().After(until) {
			return l, l == last && dg == digest && lost == 0 && dup == 0
		}
		time.Sleep(5 * time.Millisecond)
	}
}
