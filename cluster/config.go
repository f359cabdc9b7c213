package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/sequencer"
)

// Timeouts are the Raft and failover timings of a cluster. Every member
// should use the same profile: a follower with a longer election timeout
// than its peers' heartbeat only elects later, but a leader lease longer
// than the others' election timeout would let an old primary sequence
// while a new one is elected (it cannot advance stable then, since the
// sealed standbys stop acking, but it wastes the nodes' time).
type Timeouts struct {
	// Heartbeat is hashicorp/raft's HeartbeatTimeout: a follower that hears
	// nothing from the leader this long starts an election (after a random
	// extra of up to the same again).
	Heartbeat time.Duration
	// Election is raft's ElectionTimeout: a candidate that wins no vote
	// this long tries again.
	Election time.Duration
	// LeaderLease is raft's LeaderLeaseTimeout: a leader that has not
	// heard from a quorum this long steps down, and its primary stops
	// sequencing at once. At most Heartbeat (raft requires it).
	LeaderLease time.Duration
	// Commit is raft's CommitTimeout: the most a follower waits to learn
	// that an entry committed when no other entry follows it.
	Commit time.Duration
	// Seal bounds the seal round of a new primary: the control RPC to
	// every member, waiting for a quorum of answers.
	Seal time.Duration
	// DeathWatch turns on the death watch (deathwatch.go) and bounds its
	// probes: when the leader's Raft connections to a follower end and
	// the leader's port then refuses a connection (its process is gone),
	// the surviving voter with the lowest id starts an election at once.
	// A probe of a live port is given up after this long. 0 turns the
	// watch off: a dead leader is then noticed at the heartbeat timeout.
	DeathWatch time.Duration
	// PromptCheck turns on the prompt heartbeat check (promptcheck.go)
	// and is its stagger: a follower checks its leader Heartbeat after
	// the leader's last contact plus its turn (this much per surviving
	// voter of lower id), where raft alone checks anywhere from 1x to 3x
	// Heartbeat after it: a silent leader (a partition) is replaced
	// sooner and with less spread. 0 turns it off. It needs LeaderLease
	// below Heartbeat.
	PromptCheck time.Duration
}

// LANTimeouts is the default profile, for members on one LAN (round trips
// well under a millisecond). A killed primary is not waited for: the death
// watch sees its connections end and its port refuse, and the lowest
// surviving voter stands at once (drill: 10-60 ms from the kill to the
// new epoch on every node). The timeouts only matter for a silent leader
// (a partition, a dead host): the prompt check notices it 300 ms after
// its last contact, and the second survivor 50 ms later wins (~360 ms in
// the drill). They are long so that a leader process starved of CPU on a
// loaded machine (stalls of 55-150 ms, more at load 20) keeps its 290 ms
// lease: a false failover costs the nodes a pause and a new epoch
// (docs/failover-timing.md).
func LANTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   300 * time.Millisecond,
		Election:    300 * time.Millisecond,
		LeaderLease: 290 * time.Millisecond,
		Commit:      5 * time.Millisecond,
		Seal:        500 * time.Millisecond,
		DeathWatch:  100 * time.Millisecond,
		PromptCheck: 50 * time.Millisecond,
	}
}

// WANTimeouts is for members in different sites (round trips of tens of
// milliseconds, occasional stalls): a silent primary is replaced in ~1-2 s
// (a killed one at once, by the death watch), and a slow link does not
// depose a healthy primary. No prompt check: not measured across sites.
func WANTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   1000 * time.Millisecond,
		Election:    1000 * time.Millisecond,
		LeaderLease: 500 * time.Millisecond,
		Commit:      50 * time.Millisecond,
		Seal:        5 * time.Second,
		DeathWatch:  time.Second,
	}
}

// TestTimeouts is generous, for tests on a loaded machine (-race, two
// cores shared with other work), where the LAN profile would depose
// leaders at random.
func TestTimeouts() Timeouts {
	return Timeouts{
		Heartbeat:   300 * time.Millisecond,
		Election:    300 * time.Millisecond,
		LeaderLease: 300 * time.Millisecond,
		Commit:      5 * time.Millisecond,
		Seal:        2 * time.Second,
		DeathWatch:  100 * time.Millisecond,
	}
}

// Profiles names the timeout profiles (the value of the timeouts key).
var Profiles = map[string]func() Timeouts{
	"lan":  LANTimeouts,
	"wan":  WANTimeouts,
	"test": TestTimeouts,
}

// Validate reports the first timing outside its range.
func (t Timeouts) Validate() error {
	bad := func(field string, v any, want string) error { return config.New(ErrConfig, field, v, want) }
	switch {
	case t.Heartbeat < 5*time.Millisecond || t.Heartbeat > time.Minute:
		return bad("Timeouts.Heartbeat", t.Heartbeat, "5ms..1m")
	case t.Election < 5*time.Millisecond || t.Election > time.Minute:
		return bad("Timeouts.Election", t.Election, "5ms..1m")
	case t.LeaderLease < 5*time.Millisecond || t.LeaderLease > t.Heartbeat:
		return bad("Timeouts.LeaderLease", t.LeaderLease, fmt.Sprintf("5ms..Heartbeat (%v)", t.Heartbeat))
	case t.Commit < time.Millisecond || t.Commit > t.Heartbeat:
		return bad("Timeouts.Commit", t.Commit, fmt.Sprintf("1ms..Heartbeat (%v)", t.Heartbeat))
	case t.Seal < time.Millisecond || t.Seal > time.Minute:
		return bad("Timeouts.Seal", t.Seal, "1ms..1m")
	case t.PromptCheck != 0 && (t.PromptCheck < time.Millisecond || t.PromptCheck > t.Heartbeat):
		return bad("Timeouts.PromptCheck", t.PromptCheck, fmt.Sprintf("0 (off) or 1ms..Heartbeat (%v)", t.Heartbeat))
	case t.PromptCheck != 0 && t.LeaderLease >= t.Heartbeat:
		return bad("Timeouts.LeaderLease", t.LeaderLease, fmt.Sprintf("below Heartbeat (%v) with PromptCheck", t.Heartbeat))
	case t.DeathWatch != 0 && (t.DeathWatch < time.Millisecond || t.DeathWatch > t.Heartbeat):
		return bad("Timeouts.DeathWatch", t.DeathWatch, fmt.Sprintf("0 (off) or 1ms..Heartbeat (%v)", t.Heartbeat))
	}
	return nil
}

// MemberConfig sets up a Member. Start from DefaultMemberConfig.
type MemberConfig struct {
	// ID is this member's id (>= 1), its raft.ServerID in decimal.
	ID uint64
	// Dir holds the Raft log and stable store (raft.db, raft-boltdb/v2)
	// and the Raft snapshots (snapshots/) that OpenRaft opens; the Member
	// itself runs on the stores in Deps.Raft.
	Dir string
	// RaftAddr is the host:port the Raft transport binds and advertises;
	// it must be this member's RaftAddr in Members.
	RaftAddr string
	// AdminAddr is where the admin endpoint (HTTP, ops.AdminHandler)
	// listens, for `seqd admin`: people, not members (they talk on their
	// peer ports). Loopback by default; give a routable address only on a
	// trusted network (it can hand the primary role over).
	AdminAddr string
	// AdminAuth is who may call the admin surface (ops.MemberSurface):
	// loopback always, others only with AdminAuth.Token.
	AdminAuth ops.Auth
	// Members are the voters a new cluster starts with (this member
	// included); used only when Dir holds no Raft state yet. Each has its
	// raft, admin and peer (StreamAddr: seal, fetch, status; served by a
	// PeerServer with SetMember) addresses.
	Members []fsm.Member
	// Join: this member joins a running cluster and does not bootstrap;
	// the primary adds it (seqd admin add-member, Member.AddMember).
	Join bool
	// Timeouts is the timing profile (LANTimeouts by default).
	Timeouts Timeouts
	// Sequencer is the template of the primary's Core: Session, Epoch,
	// FirstSeq, StartTime and Standalone are set from the failover state
	// at each epoch.
	Sequencer sequencer.Config
	// CheckpointInterval is how often the primary records (stable seq,
	// time) through Raft, the floor of every later cut and clock.
	CheckpointInterval time.Duration
	// IdleSpin keeps the primary polling without blocking this long after
	// each frame (transport.Idle, sequencer.idle-spin): lower latency,
	// costs a core. The standby's is standby.Config.IdleSpin.
	IdleSpin time.Duration
	// Logger gets the role changes and failures (slog.Default when nil).
	Logger *slog.Logger
	// RaftLog gets hashicorp/raft's warnings and errors (os.Stderr when
	// nil; io.Discard silences them).
	RaftLog io.Writer
	// RaftStream, when set, carries OpenRaft's RPCs instead of a TCP
	// transport of its own on RaftAddr (which must still name it to the
	// peers): the drill's fault injection (PartitionLayer) goes in here.
	RaftStream raft.StreamLayer
	// TLS, when set, is this member's certificate (member-ID, of the
	// deployment's CA): Raft runs over mutual TLS and refuses a peer that
	// is not a member, or an RPC that claims another member than its
	// certificate (raft_tls.go); the peer port serves and dials members
	// only. nil: plain TCP (the unauthenticated WARN).
	TLS *tlsconf.Identity
}

// DefaultMemberConfig returns the defaults: LAN timeouts, admin on loopback.
func DefaultMemberConfig() MemberConfig {
	return MemberConfig{
		AdminAddr:          "127.0.0.1:7400",
		Timeouts:           LANTimeouts(),
		Sequencer:          sequencer.DefaultConfig(),
		CheckpointInterval: time.Second,
	}
}

// Validate reports the first field outside its allowed range.
func (c MemberConfig) Validate() error {
	bad := func(field string, v any, want string) error { return config.New(ErrConfig, field, v, want) }
	if c.ID == 0 {
		return bad("ID", c.ID, ">= 1")
	}
	if len(c.Members) > 0 && !slices.ContainsFunc(c.Members, func(m fsm.Member) bool { return m.ID == c.ID }) {
		// Before the addresses, which come from the member's entry: "id 4
		// with three peers" said raft-addr = "".
		ids := make([]string, len(c.Members))
		for i, m := range c.Members {
			ids[i] = fmt.Sprint(m.ID)
		}
		return bad("ID", c.ID, fmt.Sprintf("one of %s (id %d is not in --peers)", strings.Join(ids, ", "), c.ID))
	}
	if c.RaftAddr == "" {
		return bad("RaftAddr", c.RaftAddr, "host:port")
	}
	if c.TLS != nil && c.TLS.Name() != MemberName(c.ID) {
		return bad("TLS", c.TLS.Name(), fmt.Sprintf("a certificate named %s (security.tls-cert names another process)", MemberName(c.ID)))
	}
	if c.AdminAddr == "" {
		return bad("AdminAddr", c.AdminAddr, "host:port")
	}
	if len(c.Members) == 0 || len(c.Members) > fsm.MaxMembers {
		return bad("Members", len(c.Members), fmt.Sprintf("1..%d members (3 or 5 voters)", fsm.MaxMembers))
	}
	self := false
	ids := map[uint64]bool{}
	for _, m := range c.Members {
		if m.ID == 0 || ids[m.ID] {
			return bad("Members", fmt.Sprintf("id %d", m.ID), "distinct ids >= 1")
		}
		ids[m.ID] = true
		if m.RaftAddr == "" || m.AdminAddr == "" || m.StreamAddr == "" {
			// The peer address (StreamAddr) is where a new primary seals
			// the member and fetches what it lacks.
			return bad("Members", fmt.Sprintf("member %d", m.ID), "a raft, an admin and a peer address each")
		}
		if m.ID == c.ID {
			self = true
			if m.RaftAddr != c.RaftAddr {
				return bad("RaftAddr", c.RaftAddr, fmt.Sprintf("this member's raft address in Members (%s)", m.RaftAddr))
			}
		}
	}
	if !self {
		return bad("Members", fmt.Sprintf("%d members", len(c.Members)), fmt.Sprintf("a list that includes this member (id %d)", c.ID))
	}
	if err := c.Timeouts.Validate(); err != nil {
		return err
	}
	if c.CheckpointInterval < time.Millisecond {
		return bad("CheckpointInterval", c.CheckpointInterval, ">= 1ms")
	}
	return nil
}
