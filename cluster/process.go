package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/transport"
)

// DataConfig is a member's data path: its standbys' stream store, its
// peer server and how its standbys ack.
type DataConfig struct {
	// Dir is the stream store's directory (a member's <dir>/stream).
	Dir string
	// PeerAddr is the member's peer port, where its peer server serves
	// the store to catching-up members and answers seals and status;
	// empty: no peer server.
	PeerAddr string
	// AckWritten: standbys ack what they wrote to their store (it
	// survives the process) rather than what they fsynced. The default
	// is standby.DefaultConfig's (true, --standby.ack written: see why
	// there).
	AckWritten bool
	// IdleSpin: standbys poll without blocking this long after each
	// frame (sequencer.idle-spin).
	IdleSpin time.Duration
}

// DefaultDataConfig is the data path `seqd sequencer --cluster` runs
// with (Dir and PeerAddr are the member's own).
func DefaultDataConfig() DataConfig {
	return DataConfig{AckWritten: standby.DefaultConfig().AckWritten}
}

// Opens are how a Process opens its stream transports.
type Opens struct {
	// Client opens each standby's stream client (required).
	Client func() (transport.Client, error)
	// Server opens the primary's stream server (required).
	Server func() (transport.Server, error)
	// Raft opens the member's Raft stores and transport; nil: OpenRaft
	// (bolt in MemberConfig.Dir, TCP on MemberConfig.RaftAddr).
	Raft func(MemberConfig) (RaftDeps, error)
}

// Process is one member as a seqd process runs it: the Raft member
// (Member) with its data path, a standby on the member's stream store (the
// Member opens one at start and whenever the member stops being primary),
// and the peer server that serves the store to catching-up members for
// as long as the process lives, whichever standby holds it, and answers
// seals and status for the Member; the epochs' acks are a quorum of the
// voters.
type Process struct {
	Member *Member

	member     uint64
	members    []fsm.Member // --peers, compared with the failover state's
	join       bool
	raftAddr   string
	maxSenders int
	peers      PeerClient
	data       DataConfig
	openClient func() (transport.Client, error)
	log        *slog.Logger
	cur        atomic.Pointer[standbyHandle]
	peer       *PeerServer
}

// standbyHandle is a Standby and the stream client it reads; Close
// closes both.
type standbyHandle struct {
	*standby.Agent
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
	err := h.Agent.Run(ctx)
	h.client.Close()
	return err
}

func (h *standbyHandle) Close() error {
	err := h.Agent.Close()
	h.client.Close()
	return err
}

// StandbyStats are the counters of the member's standby now (false when
// it runs none: it is primary, or starting); safe from any goroutine.
func (p *Process) StandbyStats() (standby.Stats, bool) {
	h := p.cur.Load()
	if h == nil {
		return standby.Stats{}, false
	}
	return h.Agent.Stats(), true
}

// StandbyCounters are the counters of the standby's stream client
// (false when it runs none, or the client does not count).
func (p *Process) StandbyCounters() (transport.Counters, bool) {
	h := p.cur.Load()
	if h == nil {
		return transport.Counters{}, false
	}
	c, ok := h.client.(transport.Stats)
	if !ok {
		return transport.Counters{}, false
	}
	return c.Counters(), true
}

// NewProcess builds member cfg.ID: its data path (data), then the Member
// wired to it. Close it when Run has returned (or was never called).
func NewProcess(cfg MemberConfig, data DataConfig, open Opens) (*Process, error) {
	if open.Client == nil || open.Server == nil {
		return nil, fmt.Errorf("%w: NewProcess needs Opens.Client and Opens.Server", ErrConfig)
	}
	// The directory's identity, before Raft opens its log: a member
	// started with another's directory, or with another peer set than it
	// bootstrapped with, is refused (IdentityFile).
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir != "" {
		if err := CheckIdentity(cfg); err != nil {
			return nil, err
		}
	}
	d := &Process{member: cfg.ID, members: cfg.Members, join: cfg.Join, raftAddr: cfg.RaftAddr, maxSenders: cfg.Sequencer.MaxSenders, peers: peerClientOf(cfg.TLS), data: data, openClient: open.Client, log: cfg.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if data.PeerAddr != "" {
		ln, err := net.Listen("tcp", data.PeerAddr)
		if err != nil {
			return nil, fmt.Errorf("peer server: %w", err)
		}
		pc := DefaultPeerServerConfig()
		pc.Logger = cfg.Logger
		if cfg.TLS != nil {
			pc.TLS = cfg.TLS.Server(membersOnly)
		}
		if d.peer, err = NewPeerServer(pc, d, ln); err != nil {
			ln.Close()
			return nil, err
		}
	}
	openRaft := open.Raft
	if openRaft == nil {
		openRaft = OpenRaft
	}
	rd, err := openRaft(cfg)
	if err != nil {
		d.Close()
		return nil, err
	}
	// The Member owns rd from here on, and closes it on errors too.
	n, err := NewMember(cfg, Deps{NewFollower: d.newFollower, Stream: open.Server, Acks: newQuorumAcks, Raft: rd})
	if err != nil {
		d.Close()
		return nil, err
	}
	d.Member = n
	if cfg.Dir != "" {
		// Recorded once Raft runs on the directory (a start that failed
		// earlier, on a typo, records nothing).
		if err := RecordIdentity(cfg); err != nil {
			n.Close()
			d.Close()
			return nil, err
		}
	}
	if d.peer != nil {
		d.peer.SetMember(n)
	}
	return d, nil
}

func (d *Process) newFollower() (Follower, error) {
	cl, err := d.openClient()
	if err != nil {
		return nil, err
	}
	sc := standby.DefaultConfig()
	sc.Member, sc.Dir, sc.MaxSenders = d.member, d.data.Dir, d.maxSenders
	sc.AckWritten = d.data.AckWritten
	sc.IdleSpin = d.data.IdleSpin
	sc.Fetch = d.peers.Fetch
	opened := time.Now()
	s, err := standby.New(sc, cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	o := s.Opened()
	for _, c := range o.Cuts {
		d.log.Warn("standby: cut a torn tail of the store (a write cut short by a crash)", "member", d.member, "file", c.File, "offset", c.Offset, "bytes", c.Bytes, "after_seq", c.AfterSeq, "reason", c.Reason)
	}
	for _, why := range o.Rejected {
		d.log.Warn("standby: a state snapshot file is not believed; rebuilding from an older point", "member", d.member, "err", why)
	}
	if o.RestoredFrom > 0 || o.Applied > 0 {
		d.log.Info("standby: state rebuilt", "member", d.member, "snapshot_seq", o.RestoredFrom, "applied", o.Applied, "ms", time.Since(opened).Milliseconds())
	}
	h := &standbyHandle{Agent: s, client: cl}
	d.cur.Store(h)
	return h, nil
}

// FetchRange serves the store of the current standby (taken over or not:
// a primary serves its history too).
func (d *Process) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	h := d.cur.Load()
	if h == nil {
		return dst, from, true, 0, nil
	}
	return h.FetchRange(dst, from, to, maxBytes)
}

// Run runs the Member and the peer server until ctx ends or either
// stops, then stops the other and returns the first error.
func (d *Process) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- d.servePeer(ctx) }()
	go func() { errc <- d.Member.Run(ctx) }()
	first := <-errc
	cancel()
	second := <-errc
	for _, err := range []error{first, second} {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return first
}

// servePeer serves the peer port (fetches, seals, status) until ctx ends.
func (d *Process) servePeer(ctx context.Context) error {
	if d.peer == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	errc := make(chan error, 1)
	go func() { errc <- d.peer.Serve() }()
	select {
	case <-ctx.Done():
		d.peer.Close()
		<-errc
		return ctx.Err()
	case err := <-errc:
		if err == nil {
			err = errors.New("peer server stopped")
		}
		return fmt.Errorf("peer server: %w", err)
	}
}

// Close closes the peer server.
func (d *Process) Close() {
	if d.peer != nil {
		d.peer.Close()
	}
}

// newQuorumAcks is the quorum of an epoch's voters: the primary's stable
// seq.
func newQuorumAcks(e Epoch) Acks { return NewQuorumAcks(e) }

// Serve is Run that prints a line for scripts and tests on out when the
// member is ready, at each of its role changes and when it stopped:
//
//	sequencer: ready cluster id=ID raft=ADDR admin=ADDR
//	sequencer: primary id=ID epoch=E first_seq=S started_ns=T barrier_us=... seal_us=... commit_us=... started_us=...
//	sequencer: standby id=ID epoch=E primary=P
//	sequencer: stopped cluster id=ID epoch=E primary=P
//
// It returns nil when ctx ended it.
func (d *Process) Serve(ctx context.Context, out io.Writer) error {
	n := d.Member
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	fmt.Fprintf(out, "sequencer: ready cluster id=%d raft=%s admin=%s\n", d.member, d.raftAddr, n.AdminAddr())

	// The Member signals each role change and each move of its failover
	// state (Changed); the slow tick only backs that up. (A 1 ms ticker
	// here woke every idle member a thousand times a second.)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	role, epoch := RoleStandby, uint64(0)
	peersChecked := false
	var first error
	for first == nil {
		select {
		case err := <-errc:
			first = err
			continue
		case <-n.Changed():
		case <-tick.C:
		}
		r, st := n.Role(), n.State()
		if !peersChecked && st.Primary() != 0 {
			peersChecked = true
			if rec, given, ok := peersDiffer(d.members, d.join, st); ok {
				n.log.Warn("--peers differs from the members the cluster records: give every member the same --peers at bootstrap (after add-member or remove-member this is expected)",
					"recorded", rec, "given", given)
			}
		}
		switch {
		case r == RolePrimary && (role != RolePrimary || st.Epoch() != epoch):
			if ch := n.LastChange(); ch != nil {
				fmt.Fprintf(out, "sequencer: primary id=%d epoch=%d first_seq=%d started_ns=%d barrier_us=%d seal_us=%d catchup_us=%d commit_us=%d takeover_us=%d open_us=%d started_us=%d\n",
					d.member, ch.Epoch, ch.Cut+1, n.Status().StartedAt, ch.BarrierUS, ch.SealUS, ch.CatchUpUS, ch.CommitUS, ch.TakeoverUS, ch.OpenUS, ch.StartedUS)
			}
			role, epoch = r, st.Epoch()
		case r == RoleStandby && st.Primary() != 0 && (role != RoleStandby || st.Epoch() != epoch):
			fmt.Fprintf(out, "sequencer: standby id=%d epoch=%d primary=%d\n", d.member, st.Epoch(), st.Primary())
			role, epoch = r, st.Epoch()
		}
	}
	cancel()
	st := n.State()
	fmt.Fprintf(out, "sequencer: stopped cluster id=%d epoch=%d primary=%d\n", d.member, st.Epoch(), st.Primary())
	if errors.Is(first, context.Canceled) {
		return nil
	}
	return first
}
