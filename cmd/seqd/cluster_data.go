package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/transport"
)

// dataPath is a member's data path: newFollower opens a standby on the
// member's stream store (the Member calls it at start and whenever the
// member stops being primary), and run serves the member's peer port for
// as long as the process lives (the peer server: the store, whichever
// standby holds it, to catching-up members; seals and status for the
// member, once serve named it).
type dataPath struct {
	member     uint64
	dir        string
	maxSenders int
	openClient func() (transport.Client, error)
	log        *slog.Logger
	// ackWritten: standbys ack what they wrote to their store (it
	// survives the process) rather than what they fsynced (--standby.ack).
	ackWritten bool
	// idleSpin: standbys poll without blocking this long after each
	// frame (sequencer.idle-spin).
	idleSpin time.Duration
	cur      atomic.Pointer[standbyHandle]
	fetch    *cluster.PeerServer
}

// standbyHandle is a Standby and the stream client it reads; Close
// closes both.
type standbyHandle struct {
	*cluster.Standby
	client transport.Client
}

// Wake makes a Run blocked in Poll return, so that it sees its context
// cancelled at once (the Member stops the standby before taking it over).
func (h *standbyHandle) Wake() {
	if w, ok := h.client.(transport.Waker); ok {
		w.Wake()
	}
}

// Run follows the stream, then closes the stream client: a member that
// takes over keeps the standby's store for its primacy, but a TCP client
// left reconnecting would find its own member's new stream server.
func (h *standbyHandle) Run(ctx context.Context) error {
	err := h.Standby.Run(ctx)
	h.client.Close()
	return err
}

func (h *standbyHandle) Close() error {
	err := h.Standby.Close()
	h.client.Close()
	return err
}

// openDataPath prepares member id's data path: its stream store in dir,
// its fetch server on fetchAddr (none when empty); openClient opens the
// stream transport of each standby.
func openDataPath(id uint64, dir, fetchAddr string, maxSenders int, openClient func() (transport.Client, error), log *slog.Logger) (*dataPath, error) {
	d := &dataPath{member: id, dir: dir, maxSenders: maxSenders, openClient: openClient, log: log}
	if fetchAddr != "" {
		ln, err := net.Listen("tcp", fetchAddr)
		if err != nil {
			return nil, fmt.Errorf("peer server: %w", err)
		}
		cfg := cluster.DefaultPeerServerConfig()
		cfg.Logger = log
		if d.fetch, err = cluster.NewPeerServer(cfg, d, ln); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return d, nil
}

func (d *dataPath) newFollower() (cluster.Follower, error) {
	cl, err := d.openClient()
	if err != nil {
		return nil, err
	}
	sc := cluster.DefaultStandbyConfig()
	sc.Member, sc.Dir, sc.MaxSenders = d.member, d.dir, d.maxSenders
	sc.AckWritten = d.ackWritten
	sc.IdleSpin = d.idleSpin
	s, err := cluster.NewStandby(sc, cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	h := &standbyHandle{Standby: s, client: cl}
	d.cur.Store(h)
	return h, nil
}

// FetchRange serves the store of the current standby (taken over or not:
// a primary serves its history too).
func (d *dataPath) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	h := d.cur.Load()
	if h == nil {
		return dst, from, true, 0, nil
	}
	return h.FetchRange(dst, from, to, maxBytes)
}

// serve makes the peer server answer seals and status for n (before run
// serves it).
func (d *dataPath) serve(n *cluster.Member) {
	if d.fetch != nil {
		d.fetch.SetMember(n)
	}
}

// run serves the peer port (fetches, seals, status) until ctx ends.
func (d *dataPath) run(ctx context.Context) error {
	if d.fetch == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	errc := make(chan error, 1)
	go func() { errc <- d.fetch.Serve() }()
	select {
	case <-ctx.Done():
		d.fetch.Close()
		<-errc
		return ctx.Err()
	case err := <-errc:
		if err == nil {
			err = errors.New("peer server stopped")
		}
		return fmt.Errorf("peer server: %w", err)
	}
}

func (d *dataPath) close() {
	if d.fetch != nil {
		d.fetch.Close()
	}
}

// newAcks is the quorum of an epoch's voters: the primary's stable seq.
func newAcks(e cluster.Epoch) cluster.Acks { return cluster.NewQuorumAcks(e) }
