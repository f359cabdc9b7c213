package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// netTransport is a raft NetworkTransport on a fresh loopback port,
// over TLS with id when id is set.
func netTransport(t *testing.T, id *tlsconf.Identity, log *slog.Logger) (*raft.NetworkTransport, *tlsLayer) {
	t.Helper()
	tcp, err := newTCPLayer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var stream raft.StreamLayer = tcp
	var tl *tlsLayer
	if id != nil {
		tl = newTLSLayer(tcp, id, log)
		stream = tl
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 2 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}),
	})
	t.Cleanup(func() { trans.Close() })
	return trans, tl
}

// TestRaftTLS_PhantomRPCsRefused: a three-member Raft over the TLS
// layer, on real sockets. A rogue keeps sending, for longer than an
// election timeout, AppendEntries at a higher term as an invented member
// 9, TimeoutNow and RequestVote to every follower: with a member's
// certificate (an insider claiming another id), with a certificate of
// another CA, and over plain TCP. Every RPC is refused (counted, logged
// with the claimed id), the leader and its term are unchanged. Without
// the TLS layer the same phantom AppendEntries and TimeoutNow move the
// term (the attack; checked at the end on a plain group).
func TestRaftTLS_PhantomRPCsRefused(t *testing.T) {
	ca, other := tlstest.New(t, "site"), tlstest.New(t, "rogue")
	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	const k = 3
	tm := TestTimeouts()
	tm.Heartbeat, tm.Election, tm.LeaderLease = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond

	group := func(useTLS bool) ([k]*raft.Raft, [k]*tlsLayer, [k]raft.ServerAddress) {
		var (
			trans [k]*raft.NetworkTransport
			tls   [k]*tlsLayer
			addrs [k]raft.ServerAddress
			rafts [k]*raft.Raft
			conf  raft.Configuration
		)
		for i := range k {
			var id *tlsconf.Identity
			if useTLS {
				id = ca.Identity(t, MemberName(uint64(i+1)))
			}
			trans[i], tls[i] = netTransport(t, id, log)
			addrs[i] = trans[i].LocalAddr()
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(uint64(i + 1)), Address: addrs[i]})
		}
		for i := range k {
			rc := raftConfig(MemberConfig{ID: uint64(i + 1), Timeouts: tm, RaftLog: io.Discard})
			store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
			if err := raft.BootstrapCluster(rc, store, store, snaps, trans[i], conf); err != nil {
				t.Fatal(err)
			}
			r, err := raft.NewRaft(rc, fsm.New(), store, store, snaps, trans[i])
			if err != nil {
				t.Fatal(err)
			}
			rafts[i] = r
			t.Cleanup(func() { _ = r.Shutdown().Error() })
		}
		return rafts, tls, addrs
	}
	leaderOf := func(rafts [k]*raft.Raft) (int, uint64) {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for i, r := range rafts {
				if r.State() == raft.Leader {
					return i, r.CurrentTerm()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no leader")
		return 0, 0
	}
	// attack sends the phantom RPCs for d from rogue transport tr to
	// every follower; it returns how many were answered.
	attack := func(tr *raft.NetworkTransport, addrs [k]raft.ServerAddress, leader int, term uint64, d time.Duration) int {
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("9"), Addr: []byte(tr.LocalAddr())}
		answered := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			for i, a := range addrs {
				if i == leader {
					continue
				}
				var ar raft.AppendEntriesResponse
				if tr.AppendEntries("9", a, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term + 1}, &ar) == nil {
					answered++
				}
				var tr2 raft.TimeoutNowResponse
				if tr.TimeoutNow("9", a, &raft.TimeoutNowRequest{RPCHeader: hdr}, &tr2) == nil {
					answered++
				}
				var vr raft.RequestVoteResponse
				if tr.RequestVote("9", a, &raft.RequestVoteRequest{RPCHeader: hdr, Term: term + 5, LastLogIndex: 1 << 40, LastLogTerm: term + 4}, &vr) == nil {
					answered++
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		return answered
	}

	rafts, layers, addrs := group(true)
	leader, term := leaderOf(rafts)
	insider, _ := netTransport(t, ca.Identity(t, MemberName(3)), log)
	foreign, _ := netTransport(t, other.Identity(t, MemberName(9)), log)
	plain, _ := netTransport(t, nil, log)
	for name, tr := range map[string]*raft.NetworkTransport{"insider as 9": insider, "other CA": foreign, "plain TCP": plain} {
		if n := attack(tr, addrs, leader, term, 2*tm.Election); n != 0 {
			t.Fatalf("%s: %d phantom RPCs answered, want 0", name, n)
		}
	}
	if l, tt := leaderOf(rafts); l != leader || tt != term {
		t.Fatalf("after the phantom RPCs: leader %d term %d, was %d term %d", l+1, tt, leader+1, term)
	}
	var refused uint64
	for _, l := range layers {
		refused += l.Refused()
	}
	if refused == 0 || !strings.Contains(logs.String(), `sent an RPC of type 0 as member \"9\"`) || !strings.Contains(logs.String(), "tls: bad certificate") || !strings.Contains(logs.String(), "does not look like a TLS handshake") {
		t.Fatalf("refused %d; log:\n%s", refused, logs)
	}
	// The group still commits (the check passes real RPCs through).
	if err := rafts[leader].Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("barrier after the attack: %v", err)
	}

	// Control: the same attack on a plain group moves its term.
	prafts, _, paddrs := group(false)
	pl, pterm := leaderOf(prafts)
	if n := attack(plain, paddrs, pl, pterm, 2*tm.Election); n == 0 {
		t.Fatal("plain group: no phantom RPC answered, the control is broken")
	}
	if _, tt := leaderOf(prafts); tt == pterm {
		t.Fatalf("plain group: term still %d after the phantom RPCs, the control is broken", pterm)
	}
}
