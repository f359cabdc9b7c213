package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// The death watch notices a dead leader process in about a round trip
// instead of a heartbeat timeout, so that the heartbeat timeout and the
// leader lease can be long enough to ride out a starved process (a false
// failover) without making real failovers slow.
//
// hashicorp/raft's follower learns that its leader is gone only when no
// heartbeat came for HeartbeatTimeout (plus a random extra), and the
// election can be won only once both survivors of three timed out (a
// follower refuses votes while it still has a leader). But when a leader
// process dies, its kernel closes its sockets at once, and every follower
// reads EOF (or a reset) on the connections the leader had opened to it
// (heartbeats, appends). That alone proves nothing: raft's connection pool
// closes connections too, and a drill's partition closes them. So the
// follower then dials the leader's Raft address: on a live host, a port
// nobody listens on answers with a reset (connection refused), and only
// then is the leader's process known to be gone (or when the connection
// is accepted and then reset: the dying process's listener closed just
// after, dialProbe). A dial that connects and stays open (a live leader)
// or is closed (a drill's partition accepts and closes) or times out (an
// unreachable host, which is what a real partition looks like) proves
// nothing, and raft's own timeouts decide, as before.
//
// On a confirmed death the follower makes its own raft start an election
// now, with what a leadership transfer sends: a TimeoutNow RPC, sent to
// itself through its own transport (raft v1.7.3 has no follower API for
// it). raft then becomes a candidate without pre-vote and asks for votes
// marked LeadershipTransfer, which the other survivor grants even though
// it has not timed the dead leader out yet. Sending it through the
// transport rather than injecting it into raft's RPC channel keeps raft's
// Transport untouched (raft finds its optional abilities, pre-vote among
// them, by type assertions that a wrapper would have to repeat).
//
// Only one survivor should do so: two candidates of the same term split
// the vote and both wait out an election timeout. So the survivor with the
// lowest id stands; another stands only when every voter of lower id
// (the dead leader aside) is gone too, by the same probe. Waiting a turn
// and standing when the term had not moved did not work: the first
// candidate writes its term and vote to disk before it asks, and on a
// loaded machine those writes took longer than any turn, so both stood
// (a failover of a second in the drill). If the lowest survivor is alive
// but its watch saw nothing (starved), the prompt heartbeat check
// (promptcheck.go) replaces the leader a heartbeat timeout later.
//
// One refusal is not a verdict: a live host can refuse a probe too (a
// firewall's REJECT rule, a resetting proxy), and the TimeoutNow election
// bypasses pre-vote, so a wrong verdict deposes a healthy leader. So the
// watch corroborates before it acts: it probes again after confirmDelay
// (DeathWatch/10), and any sign of life meanwhile (the second probe
// connects, or raft heard from the leader after the first probe began)
// leaves the leader alone. A killed process's port refuses every probe
// and sends nothing, so a real failover costs confirmDelay more.
//
// Safety is raft's: the election is an ordinary one (the other survivor
// grants only a candidate whose log is as up to date as its own), the old
// primary still stops when it loses the lease or hears a higher term, and
// the new primary changes the epoch as after any election. A wrong verdict
// (a live leader whose port refused twice and that sent nothing between)
// would only cost a needless election.

// peerClosed reports whether a Read error means the other end closed the
// connection (EOF, or a reset when it had unread data): its process ended,
// or it closed the connection itself. A connection this side closed
// (net.ErrClosed) or a timeout is not the peer's doing.
func peerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// probeGone reports whether a probe's error (dialProbe) means that the
// host answered and nothing listens on the port any more: the process is
// gone.
func probeGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// watchRank is this member's turn among the voters that survive the dead
// leader: 0 for the lowest id, which starts the election at once. ok is
// false when this member is no voter, or is the dead leader.
func watchRank(self, dead uint64, voters []uint64) (rank int, ok bool) {
	for _, v := range voters {
		switch {
		case v == self:
			ok = self != dead
		case v != dead && v < self:
			rank++
		}
	}
	if !ok {
		return 0, false
	}
	return rank, true
}

// watchOutcome is what one check of the death watch concluded.
type watchOutcome int

const (
	// watchNotFollower: this member leads, or is electing already.
	watchNotFollower watchOutcome = iota
	// watchNoLeader: no leader known, or this member is it.
	watchNoLeader
	// watchAlive: the probe connected or timed out; raft's timeouts decide.
	watchAlive
	// watchNotVoter: the leader is gone, but this member cannot stand.
	watchNotVoter
	// watchDeferred: a voter of lower id is alive and stands instead.
	watchDeferred
	// watchOvertaken: meanwhile raft moved on (another election began, a
	// leader appeared).
	watchOvertaken
	// watchElection: this member's raft was told to start an election.
	watchElection
	// watchFailed: the configuration or the TimeoutNow RPC failed (raft
	// shutting down, the member partitioned by a drill).
	watchFailed
)

// watchedRaft is what the death watch reads of raft and does to it
// (raftHandle; a fake in the unit tests).
type watchedRaft interface {
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	State() raft.RaftState
	CurrentTerm() uint64
	// LastContact is when raft last heard from its leader.
	LastContact() time.Time
	// Voters are the voters of the latest configuration.
	Voters() ([]voter, error)
	// TimeoutNow makes the local raft start an election at once.
	TimeoutNow() error
}

// deathWatch decides, after a Raft connection was closed by its peer,
// whether the leader process is gone, and if so starts an election.
// peerClosed is safe from any goroutine; one check runs at a time (the
// dead leader's connections all end at once; the rest are dropped).
type deathWatch struct {
	self  uint64
	probe time.Duration // Timeouts.DeathWatch: bounds a probe
	// confirm is the pause before the second probe that must corroborate
	// a refusal (DeathWatch/10).
	confirm time.Duration
	dial    func(addr string, timeout time.Duration) error
	log     *slog.Logger

	raft atomic.Pointer[raftHandle] // nil until raft runs
	busy atomic.Bool
	// For tests: checks finished, the last one's outcome, elections
	// started.
	checks    atomic.Uint64
	last      atomic.Int32
	elections atomic.Uint64
	// refuted counts refusals that the second look found alive (a live
	// host that refused a probe).
	refuted atomic.Uint64
}

func newDeathWatch(self uint64, t Timeouts, log *slog.Logger) *deathWatch {
	return &deathWatch{self: self, probe: t.DeathWatch, confirm: t.DeathWatch / 10, dial: dialProbe, log: log}
}

// dialProbe connects to addr and waits, until timeout, for the other
// side to reset the connection. A killed process's kernel closes its
// sockets one by one, the connections to the followers often before the
// listener: a follower's probe may then be accepted by the kernel into the
// listener's queue, and is reset when the listener closes an instant
// later. A live raft waits for a request and sends nothing; a drill's
// partition closes (EOF): both are alive, nil. The error is the dial's
// (refused: nothing listens) or the reset.
func dialProbe(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil
	}
	var b [1]byte
	if _, err := c.Read(b[:]); errors.Is(err, syscall.ECONNRESET) {
		return err
	}
	return nil
}

// peerClosed is called when a Raft connection another member opened to
// this one was closed by that member: the check runs on a goroutine of
// its own, unless one runs already.
func (w *deathWatch) peerClosed() {
	r := w.raft.Load()
	if r == nil || !w.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer w.busy.Store(false)
		w.last.Store(int32(w.check(r)))
		w.checks.Add(1)
	}()
}

// check probes the leader and, when its port refuses and a second look
// (corroborate) finds no sign of life, starts an election in this
// member's turn.
func (w *deathWatch) check(r watchedRaft) watchOutcome {
	if r.State() != raft.Follower {
		return watchNotFollower
	}
	addr, id := r.LeaderWithID()
	leader := parseServerID(id)
	if addr == "" || leader == 0 || leader == w.self {
		return watchNoLeader
	}
	term := r.CurrentTerm()
	start := time.Now()
	if err := w.dial(string(addr), w.probe); !probeGone(err) {
		return watchAlive
	}
	if !w.corroborate(r, string(addr), start) {
		w.refuted.Add(1)
		w.log.Info("death watch: the leader's port refused a probe, but it is alive", "leader", leader, "leader_addr", string(addr))
		return watchAlive
	}
	voters, err := r.Voters()
	if err != nil {
		w.log.Warn("death watch: raft configuration", "err", err)
		return watchFailed
	}
	rank, ok := watchRank(w.self, leader, voterIDs(voters))
	if !ok {
		return watchNotVoter
	}
	for _, v := range voters {
		if v.id != leader && v.id < w.self && !probeGone(w.dial(v.addr, w.probe)) {
			return watchDeferred
		}
	}
	// A vote request of another candidate raised this member's term, and
	// a new leader's first heartbeat names it.
	if r.State() != raft.Follower || r.CurrentTerm() != term {
		return watchOvertaken
	}
	if a, _ := r.LeaderWithID(); a != "" && a != addr {
		return watchOvertaken
	}
	if err := r.TimeoutNow(); err != nil {
		w.log.Warn("death watch: cannot start an election", "err", err)
		return watchFailed
	}
	w.elections.Add(1)
	w.log.Warn("raft leader process gone (its port refused a connection): starting an election now",
		"leader", leader, "leader_addr", string(addr), "term", term, "rank", rank)
	return watchElection
}

// corroborate reports whether the leader at addr, whose port refused a
// probe begun at start, still looks dead after confirmDelay: raft heard
// nothing from it since start, and a second probe is refused too.
func (w *deathWatch) corroborate(r watchedRaft, addr string, start time.Time) bool {
	time.Sleep(w.confirm)
	if r.LastContact().After(start) {
		return false
	}
	return probeGone(w.dial(addr, w.probe)) && !r.LastContact().After(start)
}

// raftHandle is watchedRaft over a running raft and its transport.
type raftHandle struct {
	r     *raft.Raft
	trans raft.Transport
	id    raft.ServerID
}

func (h *raftHandle) LeaderWithID() (raft.ServerAddress, raft.ServerID) { return h.r.LeaderWithID() }
func (h *raftHandle) State() raft.RaftState                             { return h.r.State() }
func (h *raftHandle) CurrentTerm() uint64                               { return h.r.CurrentTerm() }
func (h *raftHandle) LastContact() time.Time                            { return h.r.LastContact() }

func (h *raftHandle) Voters() ([]voter, error) { return votersOf(h.r) }

// voter is a voter of a raft configuration.
type voter struct {
	id   uint64
	addr string
}

// votersOf are the voters of r's latest configuration.
func votersOf(r *raft.Raft) ([]voter, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var vs []voter
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			vs = append(vs, voter{id: parseServerID(s.ID), addr: string(s.Address)})
		}
	}
	return vs, nil
}

// voterIDs are the ids of vs.
func voterIDs(vs []voter) []uint64 {
	ids := make([]uint64, len(vs))
	for i, v := range vs {
		ids[i] = v.id
	}
	return ids
}

// TimeoutNow sends raft's TimeoutNow RPC to this member itself: raft.go's
// timeoutNow clears the leader and becomes a candidate of a leadership
// transfer. It checks only the header's protocol version.
func (h *raftHandle) TimeoutNow() error {
	self := h.trans.LocalAddr()
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(h.id),
		Addr:            h.trans.EncodePeer(h.id, self),
	}}
	// The transport pools its connections, the one to itself too, and
	// finds one broken only by using it (a drill's partition closes every
	// connection the member holds); a broken one is dropped, so the next
	// try dials afresh.
	var err error
	for range 3 {
		if err = h.trans.TimeoutNow(h.id, self, req, &raft.TimeoutNowResponse{}); err == nil {
			return nil
		}
	}
	return err
}

// watchLayer is the raft.StreamLayer of a member: its accepted
// connections tell the death watch (when there is one) that their peer
// closed them, and its dialed ones are freshConns. Close (raft's
// transport shutting down) closes the listener and then every connection
// it dialed, as the kernel does for a process that dies: the peers' death
// watches then see a member that shuts down (a leader whose Member is
// closed, the demo's kill) at once, not a heartbeat timeout later (raft
// leaves its pooled connections open at shutdown).
//
// Safe for concurrent use; mu guards dialed (at most raft's pool and its
// requests in flight: each connection leaves when closed).
type watchLayer struct {
	raft.StreamLayer
	w      *deathWatch
	mu     sync.Mutex
	dialed map[*freshConn]struct{}
	closed bool
}

func (l *watchLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil || l.w == nil {
		return c, err
	}
	return &watchConn{Conn: c, w: l.w}, nil
}

func (l *watchLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.StreamLayer.Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	fc := &freshConn{Conn: c, dial: func() (net.Conn, error) { return l.StreamLayer.Dial(addr, timeout) }}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if l.dialed == nil {
		l.dialed = map[*freshConn]struct{}{}
	}
	l.dialed[fc] = struct{}{}
	fc.onClose = func() {
		l.mu.Lock()
		delete(l.dialed, fc)
		l.mu.Unlock()
	}
	return fc, nil
}

// Close stops listening first (a peer's probe is then refused), then
// closes the connections this member dialed.
func (l *watchLayer) Close() error {
	err := l.StreamLayer.Close()
	l.mu.Lock()
	l.closed = true
	open := make([]*freshConn, 0, len(l.dialed))
	for c := range l.dialed {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	return err
}

// watchConn is an accepted Raft connection. Read costs one comparison
// more than the connection's own when it succeeds.
type watchConn struct {
	net.Conn
	w *deathWatch
}

func (c *watchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && peerClosed(err) {
		c.w.peerClosed()
	}
	return n, err
}

// tcpLayer is the plain TCP raft.StreamLayer (raft's own TCPStreamLayer
// can only be built inside its transport, where no watch can wrap it).
type tcpLayer struct{ ln net.Listener }

// newTCPLayer listens on addr, which the peers must be able to dial: an
// unspecified address (0.0.0.0) is refused, as raft's NewTCPTransport
// does, since raft advertises the listening address in its votes.
func newTCPLayer(addr string) (*tcpLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: raft address %s is not one peers can dial", ErrConfig, addr)
	}
	return &tcpLayer{ln: ln}, nil
}

func (l *tcpLayer) Accept() (net.Conn, error) { return l.ln.Accept() }
func (l *tcpLayer) Close() error              { return l.ln.Close() }
func (l *tcpLayer) Addr() net.Addr            { return l.ln.Addr() }

func (l *tcpLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}
