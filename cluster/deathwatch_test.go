package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
)

// fakeRaft is a watchedRaft whose answers the test sets.
type fakeRaft struct {
	state    raft.RaftState
	leader   raft.ServerAddress
	leaderID raft.ServerID
	term     uint64
	voters   []voter
	timeouts int // TimeoutNow calls
	// contact, if set, is LastContact's answer from the second call on
	// (raft hears from the leader after the first probe began).
	contact time.Time
	calls   int
}

func (f *fakeRaft) LeaderWithID() (raft.ServerAddress, raft.ServerID) { return f.leader, f.leaderID }
func (f *fakeRaft) State() raft.RaftState                             { return f.state }
func (f *fakeRaft) CurrentTerm() uint64                               { return f.term }
func (f *fakeRaft) Voters() ([]voter, error)                          { return f.voters, nil }
func (f *fakeRaft) LastContact() time.Time {
	f.calls++
	if f.calls > 1 {
		return f.contact
	}
	return time.Time{}
}
func (f *fakeRaft) TimeoutNow() error { f.timeouts++; return nil }

// refused is what net.Dial returns for a port nobody listens on.
var refused error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// reset is a probe accepted into a dying listener's queue, then reset as
// the listener closed.
var reset error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}

// timedOut is a dial that got no answer (an unreachable host).
var timedOut error = &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}

// TestDeathWatch_Decisions: the watch starts an election only when the
// leader it follows, not itself, refuses a connection, and then only on
// the surviving voter with the lowest id that is alive: a member whose
// lower peer answers leaves the election to it.
func TestDeathWatch_Decisions(t *testing.T) {
	const leaderAddr = "10.0.0.1:7000"
	voters := []voter{{1, leaderAddr}, {2, "10.0.0.2:7000"}, {3, "10.0.0.3:7000"}}
	follower := func() *fakeRaft {
		return &fakeRaft{state: raft.Follower, leader: leaderAddr, leaderID: "1", term: 5, voters: voters}
	}
	cases := []struct {
		name      string
		self      uint64
		raft      *fakeRaft
		probes    map[string]error // by address; nil: connected
		want      watchOutcome
		wantProbe []string
	}{
		{name: "refused, lowest survivor", self: 2, raft: follower(), probes: map[string]error{leaderAddr: refused},
			want: watchElection, wantProbe: []string{leaderAddr, leaderAddr}},
		{name: "accepted, then reset: the listener was closing", self: 2, raft: follower(), probes: map[string]error{leaderAddr: reset},
			want: watchElection, wantProbe: []string{leaderAddr, leaderAddr}},
		{name: "refused, next survivor, the lowest is alive", self: 3, raft: follower(), probes: map[string]error{leaderAddr: refused},
			want: watchDeferred, wantProbe: []string{leaderAddr, leaderAddr, "10.0.0.2:7000"}},
		{name: "refused, next survivor, the lowest is gone too", self: 3, raft: follower(), probes: map[string]error{leaderAddr: refused, "10.0.0.2:7000": refused},
			want: watchElection, wantProbe: []string{leaderAddr, leaderAddr, "10.0.0.2:7000"}},
		{name: "connected: alive, or a drill's partition", self: 2, raft: follower(), want: watchAlive, wantProbe: []string{leaderAddr}},
		{name: "timed out: unreachable host", self: 2, raft: follower(), probes: map[string]error{leaderAddr: timedOut},
			want: watchAlive, wantProbe: []string{leaderAddr}},
		{name: "this member leads", self: 1, raft: &fakeRaft{state: raft.Leader, leader: leaderAddr, leaderID: "1", voters: voters},
			probes: map[string]error{leaderAddr: refused}, want: watchNotFollower},
		{name: "this member is the known leader", self: 1, raft: follower(), probes: map[string]error{leaderAddr: refused}, want: watchNoLeader},
		{name: "no leader known", self: 2, raft: &fakeRaft{state: raft.Follower, voters: voters}, want: watchNoLeader},
		{name: "candidate already", self: 2, raft: &fakeRaft{state: raft.Candidate, voters: voters}, want: watchNotFollower},
		{name: "non-voter", self: 4, raft: follower(), probes: map[string]error{leaderAddr: refused}, want: watchNotVoter, wantProbe: []string{leaderAddr, leaderAddr}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var probed []string
			w := newDeathWatch(tc.self, Timeouts{Heartbeat: 150 * time.Millisecond, DeathWatch: 100 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			w.dial = func(addr string, _ time.Duration) error { probed = append(probed, addr); return tc.probes[addr] }
			if got := w.check(tc.raft); got != tc.want {
				t.Fatalf("outcome %d, want %d", got, tc.want)
			}
			if fmt.Sprint(probed) != fmt.Sprint(tc.wantProbe) {
				t.Errorf("probed %v, want %v", probed, tc.wantProbe)
			}
			if want := map[bool]int{true: 1}[tc.want == watchElection]; tc.raft.timeouts != want {
				t.Errorf("TimeoutNow called %d times, want %d", tc.raft.timeouts, want)
			}
		})
	}
}

// TestDeathWatch_RefusalNeedsCorroboration: one refused probe is no
// verdict (a firewall's REJECT, a resetting proxy): when the second probe
// connects, or raft heard from the leader after the first began, the
// leader is alive and no election starts.
func TestDeathWatch_RefusalNeedsCorroboration(t *testing.T) {
	const leaderAddr = "10.0.0.1:7000"
	voters := []voter{{1, leaderAddr}, {2, "10.0.0.2:7000"}, {3, "10.0.0.3:7000"}}
	for _, tc := range []struct {
		name    string
		probes  []error // the leader's probes, in turn; then connected
		contact bool    // raft hears from the leader meanwhile
		want    watchOutcome
	}{
		{name: "refused once, then connected", probes: []error{refused}, want: watchAlive},
		{name: "reset once, then connected", probes: []error{reset}, want: watchAlive},
		{name: "refused twice, but raft heard from it", probes: []error{refused, refused}, contact: true, want: watchAlive},
		{name: "refused twice, silent: gone", probes: []error{refused, refused}, want: watchElection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRaft{state: raft.Follower, leader: leaderAddr, leaderID: "1", term: 5, voters: voters}
			if tc.contact {
				f.contact = time.Now().Add(time.Hour)
			}
			w := newDeathWatch(2, Timeouts{Heartbeat: 150 * time.Millisecond, DeathWatch: 100 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			n := 0
			w.dial = func(addr string, _ time.Duration) error {
				if addr != leaderAddr || n >= len(tc.probes) {
					return nil
				}
				n++
				return tc.probes[n-1]
			}
			if got := w.check(f); got != tc.want {
				t.Fatalf("outcome %d, want %d", got, tc.want)
			}
			wantTimeouts, wantRefuted := 0, uint64(1)
			if tc.want == watchElection {
				wantTimeouts, wantRefuted = 1, 0
			}
			if f.timeouts != wantTimeouts || w.refuted.Load() != wantRefuted {
				t.Errorf("TimeoutNow called %d times, refuted %d; want %d, %d", f.timeouts, w.refuted.Load(), wantTimeouts, wantRefuted)
			}
		})
	}
}

// TestWatchRank: the surviving voters take turns by id, the dead leader
// left out; the dead leader itself and non-voters have no turn.
func TestWatchRank(t *testing.T) {
	cases := []struct {
		self, dead uint64
		voters     []uint64
		rank       int
		ok         bool
	}{
		{2, 1, []uint64{1, 2, 3}, 0, true},
		{3, 1, []uint64{1, 2, 3}, 1, true},
		{1, 2, []uint64{1, 2, 3}, 0, true},
		{3, 2, []uint64{3, 1, 2}, 1, true},
		{1, 1, []uint64{1, 2, 3}, 0, false},
		{4, 1, []uint64{1, 2, 3}, 0, false},
		{5, 3, []uint64{1, 2, 3, 4, 5}, 3, true},
	}
	for _, tc := range cases {
		rank, ok := watchRank(tc.self, tc.dead, tc.voters)
		if rank != tc.rank || ok != tc.ok {
			t.Errorf("watchRank(%d, %d, %v) = %d, %v; want %d, %v", tc.self, tc.dead, tc.voters, rank, ok, tc.rank, tc.ok)
		}
	}
}

// TestPeerClosed: only the peer's close (EOF, a reset) wakes the watch,
// not this side's own close or a timeout; only a refused dial convicts.
func TestPeerClosed(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("wrapped: %w", io.EOF), true},
		{reset, true},
		{net.ErrClosed, false},
		{os.ErrDeadlineExceeded, false},
		{io.ErrUnexpectedEOF, false},
	} {
		if got := peerClosed(tc.err); got != tc.want {
			t.Errorf("peerClosed(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !probeGone(refused) || !probeGone(reset) || probeGone(timedOut) || probeGone(nil) || probeGone(io.EOF) || probeGone(errors.New("x")) {
		t.Error("probeGone convicts only a refused or reset connection")
	}
}

// watchGroup is three raft members on bolt stores and real TCP, each on a
// PartitionLayer so that a test can kill one member's connections and
// port; the death watch wraps every layer. Once a leader is elected, the
// heartbeat and election timeouts become a minute: from then on only the
// death watch can explain an election.
type watchGroup struct {
	rafts  [3]*raft.Raft
	stores [3]*raftStores
	layers [3]*PartitionLayer
}

func newWatchGroup(t *testing.T) *watchGroup {
	t.Helper()
	tm := TestTimeouts()
	g := &watchGroup{}
	var members []fsm.Member
	for i := range 3 {
		pl, err := NewPartitionLayer("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g.layers[i] = pl
		members = append(members, fsm.Member{ID: uint64(i + 1), Role: fsm.Voter, RaftAddr: pl.Addr().String(), AdminAddr: "127.0.0.1:1"})
	}
	for i := range 3 {
		cfg := MemberConfig{ID: uint64(i + 1), Dir: t.TempDir(), RaftAddr: members[i].RaftAddr, Members: members,
			Timeouts: tm, RaftStream: g.layers[i], RaftLog: io.Discard,
			Logger: slog.New(slog.NewTextHandler(tlogWriter{t}, nil))}
		r, st, err := openRaft(cfg, fsm.New())
		if err != nil {
			t.Fatal(err)
		}
		g.rafts[i], g.stores[i] = r, st
		t.Cleanup(func() {
			_ = r.Shutdown().Error()
			st.close()
		})
	}
	l := g.leader(t, -1)
	for _, r := range g.rafts {
		rc := r.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = time.Minute, time.Minute
		if err := r.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	// Both followers hold connections from the leader (heartbeats,
	// appends) once they have answered it.
	for i, r := range g.rafts {
		if i != l {
			if err := r.VerifyLeader().Error(); err == nil {
				t.Fatal("a follower verified leadership")
			}
		}
	}
	if err := g.rafts[l].Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	// The barrier is committed on a majority, maybe not on both
	// followers: a follower whose log is shorter cannot win the election
	// the death watch starts (the other rejects it, "our last index is
	// greater"), and with a minute of timeouts nothing else would elect
	// anyone. The tests begin with every log equal.
	want := g.rafts[l].LastIndex()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		equal := true
		for _, r := range g.rafts {
			equal = equal && r.LastIndex() == want
		}
		if equal {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the followers' logs did not reach the leader's within 10s")
		}
	}
	return g
}

// leader waits for a leader other than not (-1: any) and returns it.
func (g *watchGroup) leader(t *testing.T, not int) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for i, r := range g.rafts {
			if i != not && r.State() == raft.Leader {
				return i
			}
		}
	}
	t.Fatal("no leader within 30s")
	return -1
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestDeathWatch_KilledLeaderIsReplacedAtOnce: the leader's port closes
// and its connections end, as when its process is killed. With a minute
// of heartbeat timeout, the survivors elect a new leader anyway: the
// surviving voter with the lowest id, told by its death watch, and only
// it (the other finds it alive and leaves the election to it).
func TestDeathWatch_KilledLeaderIsReplacedAtOnce(t *testing.T) {
	g := newWatchGroup(t)
	old := g.leader(t, -1)
	term := g.rafts[old].CurrentTerm()
	// The port first, so the probe that the closed connections cause is
	// refused, as a dead process's is.
	g.layers[old].Close()
	g.layers[old].SetPartitioned(true)
	_ = g.rafts[old].Shutdown().Error()

	l := g.leader(t, old)
	lowest := 0
	if old == 0 {
		lowest = 1
	}
	if l != lowest {
		t.Errorf("new leader is member %d, want %d (the lowest surviving id)", l+1, lowest+1)
	}
	if got := g.rafts[l].CurrentTerm(); got <= term {
		t.Errorf("new leader's term %d, want above %d", got, term)
	}
	for i := range g.rafts {
		if i == old {
			continue
		}
		want := uint64(0)
		if i == lowest {
			want = 1
		}
		if got := g.stores[i].watch.elections.Load(); got != want {
			t.Errorf("member %d: death watch started %d elections, want %d", i+1, got, want)
		}
	}
}

// TestDeathWatch_PartitionedLeaderIsLeftToRaft: a drill's partition
// closes the leader's connections but its port still accepts (and
// closes): the survivors' probes connect, and nothing fast happens; the
// survivors still follow the old leader until raft's own timeout.
func TestDeathWatch_PartitionedLeaderIsLeftToRaft(t *testing.T) {
	g := newWatchGroup(t)
	old := g.leader(t, -1)
	g.layers[old].SetPartitioned(true)
	for i := range g.rafts {
		if i == old {
			continue
		}
		w := g.stores[i].watch
		for deadline := time.Now().Add(30 * time.Second); w.checks.Load() == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("member %d: no death watch check within 30s", i+1)
			}
		}
		if o := watchOutcome(w.last.Load()); o != watchAlive {
			t.Errorf("member %d: outcome %d, want watchAlive", i+1, o)
		}
		if n := w.elections.Load(); n != 0 {
			t.Errorf("member %d: %d elections started", i+1, n)
		}
		if _, id := g.rafts[i].LeaderWithID(); id != serverID(uint64(old+1)) {
			t.Errorf("member %d follows %q, want the old leader %d", i+1, id, old+1)
		}
	}
}

// TestDialProbe: on real sockets, a port nobody listens on and a listener
// that closes with the probe still in its queue (a process being killed)
// convict; a live raft (accepts, sends nothing) and a drill's partition
// (accepts, closes) do not.
func TestDialProbe(t *testing.T) {
	listen := func(serve func(net.Conn)) net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if serve != nil {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					serve(c)
				}
			}()
		}
		return ln
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	live := listen(func(c net.Conn) { go func() { <-stop; c.Close() }() })
	partitioned := listen(func(c net.Conn) { c.Close() })
	closed := listen(nil)
	closedAddr := closed.Addr().String()
	closed.Close()
	dying := listen(nil) // never accepts: the probe waits in its queue

	if err := dialProbe(live.Addr().String(), 200*time.Millisecond); probeGone(err) {
		t.Errorf("live: %v", err)
	}
	if err := dialProbe(partitioned.Addr().String(), 5*time.Second); probeGone(err) {
		t.Errorf("partitioned: %v", err)
	}
	if err := dialProbe(closedAddr, 5*time.Second); !probeGone(err) {
		t.Errorf("closed port: %v, want refused", err)
	}
	done := make(chan error, 1)
	go func() { done <- dialProbe(dying.Addr().String(), 30*time.Second) }()
	// Whether the probe is queued (reset) or comes after the close
	// (refused), the verdict is the same.
	time.Sleep(20 * time.Millisecond)
	dying.Close()
	if err := <-done; !probeGone(err) {
		t.Errorf("listener closed with the probe queued: %v, want reset", err)
	}
}

// TestDeathWatch_ShutDownLeaderIsReplacedAtOnce: a leader whose raft shuts
// down (Member.Close, the demo's kill) closes the connections it dialed, as
// a dying process's kernel does, so the survivors' death watches replace
// it at once; raft alone leaves its pooled connections open, and only the
// minute of heartbeat timeout would.
func TestDeathWatch_ShutDownLeaderIsReplacedAtOnce(t *testing.T) {
	g := newWatchGroup(t)
	old := g.leader(t, -1)
	term := g.rafts[old].CurrentTerm()
	if err := g.rafts[old].Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	l := g.leader(t, old)
	if got := g.rafts[l].CurrentTerm(); got <= term {
		t.Errorf("new leader's term %d, want above %d", got, term)
	}
	var n uint64
	for i := range g.rafts {
		if i != old {
			n += g.stores[i].watch.elections.Load()
		}
	}
	if n != 1 {
		t.Errorf("death watches started %d elections, want 1", n)
	}
}

// TestDeathWatch_OneRefusedProbeKeepsAHealthyLeader: a live leader's
// port refuses one probe (a firewall's REJECT, a resetting proxy) just
// when a connection from it closed: the lowest survivor's watch must not
// depose it. The second probe, a moment later, connects, and nothing
// happens: the leader stays, in the same term.
func TestDeathWatch_OneRefusedProbeKeepsAHealthyLeader(t *testing.T) {
	g := newWatchGroup(t)
	old := g.leader(t, -1)
	term := g.rafts[old].CurrentTerm()
	lowest := 0
	if old == 0 {
		lowest = 1
	}
	w := g.stores[lowest].watch
	// Take the watch's turn, so that no check reads dial while it changes.
	for !w.busy.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	before := w.checks.Load()
	leaderAddr := g.layers[old].Addr().String()
	var refusedOnce atomic.Bool
	w.dial = func(addr string, timeout time.Duration) error {
		if addr == leaderAddr && refusedOnce.CompareAndSwap(false, true) {
			return refused
		}
		return dialProbe(addr, timeout)
	}
	w.busy.Store(false)
	w.peerClosed() // a connection from the leader closed (raft's pool, a proxy)
	for deadline := time.Now().Add(30 * time.Second); w.checks.Load() == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no death watch check within 30s")
		}
	}
	if !refusedOnce.Load() {
		t.Fatal("the probe was never refused: the test proves nothing")
	}
	if o := watchOutcome(w.last.Load()); o != watchAlive {
		t.Errorf("outcome %d, want watchAlive (%d)", o, watchAlive)
	}
	if n := w.elections.Load(); n != 0 {
		t.Errorf("death watch started %d elections after one refused probe", n)
	}
	time.Sleep(200 * time.Millisecond) // an election would have ended by now
	if s := g.rafts[old].State(); s != raft.Leader {
		t.Errorf("the healthy leader is %v now", s)
	}
	if got := g.rafts[old].CurrentTerm(); got != term {
		t.Errorf("term moved from %d to %d", term, got)
	}
}
