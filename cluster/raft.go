package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd/fsm"
)

// raftStores is what a member keeps on disk: the Raft log and stable store
// in one bolt file, and file snapshots beside it.
type raftStores struct {
	bolt  *raftboltdb.BoltStore
	snaps *raft.FileSnapshotStore
	trans *raft.NetworkTransport
	// watch is the death watch on the transport's accepted connections
	// (nil when Timeouts.DeathWatch is 0).
	watch *deathWatch
	// prompt is the prompt heartbeat check (nil unless
	// Timeouts.PromptCheck); closing stopPrompt ends it.
	prompt     *promptCheck
	stopPrompt chan struct{}
	// startIndex is the last index of the Raft log (or snapshot) found on
	// disk at start: 0 for a new member. A restarted member opens its
	// standby once the failover state has caught up past it (Member.Run).
	startIndex uint64
}

func (s *raftStores) close() {
	if s.stopPrompt != nil {
		close(s.stopPrompt)
		s.stopPrompt = nil
	}
	if s.trans != nil {
		s.trans.Close()
	}
	if s.bolt != nil {
		s.bolt.Close()
	}
}

// serverID is the raft.ServerID of member id.
func serverID(id uint64) raft.ServerID { return raft.ServerID(strconv.FormatUint(id, 10)) }

// parseServerID is serverID's inverse (0 when it is not a member id).
func parseServerID(s raft.ServerID) uint64 {
	id, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// raftConfig is hashicorp/raft's configuration for cfg: the timeouts of
// the profile, warnings and errors of raft to stderr (its debug chatter
// would drown the process's own log).
func raftConfig(cfg MemberConfig) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.ID)
	rc.HeartbeatTimeout = cfg.Timeouts.Heartbeat
	rc.ElectionTimeout = cfg.Timeouts.Election
	rc.LeaderLeaseTimeout = cfg.Timeouts.LeaderLease
	rc.CommitTimeout = cfg.Timeouts.Commit
	// The failover state is small and changes a few times a second at
	// most: snapshot every 1024 entries, keep as many for lagging peers.
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 1024
	rc.SnapshotInterval = 30 * time.Second
	// Pre-vote stays on (raft's default): a member that missed heartbeats
	// alone (starved of CPU on a loaded machine, or cut off) first asks
	// whether it could win, and the others, who still hear the leader,
	// say no; without pre-vote it raises its term and its next message
	// deposes a healthy leader, a false failover (a 60 s soak at load 30
	// saw 483 elections without, 104 with;
	// TestRaft_LoneFollowerDoesNotDeposeTheLeader). A real failover is
	// also faster: the second survivor to miss the dead leader wins at
	// once, where two candidates of the same term used to split the vote
	// and wait out an election timeout.
	// Survivors do reject a candidate while they still have the leader
	// (hashicorp/raft v1.7.3 requestPreVote, as requestVote does), but only
	// until their own heartbeat timeout clears it, and a candidate that
	// gets a late AppendEntries of the dead leader's term (sent before the
	// kill, read late on a starved process) follows it again for one more
	// timeout: bounded, never the minutes once blamed on pre-vote (those
	// were primaries deadlocked on their own store by a multicast repair,
	// which stayed primary and refused every seal; teeSink.Publish,
	// docs/failover-timing.md).
	rc.PreVoteDisabled = false
	out := cfg.RaftLog
	if out == nil {
		out = os.Stderr
	}
	rc.Logger = hclog.New(&hclog.LoggerOptions{
		Name:   "raft-" + strconv.FormatUint(cfg.ID, 10),
		Level:  hclog.Warn,
		Output: out,
	})
	return rc
}

// openRaft opens the stores in cfg.Dir and the TCP transport on
// cfg.RaftAddr, bootstraps a new cluster from cfg.Members when the stores
// are empty, and starts Raft with f.
func openRaft(cfg MemberConfig, f *fsm.FSM) (*raft.Raft, *raftStores, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	st := &raftStores{}
	var err error
	if st.bolt, err = raftboltdb.NewBoltStore(filepath.Join(cfg.Dir, "raft.db")); err != nil {
		return nil, nil, fmt.Errorf("cluster: raft store in %s: %w", cfg.Dir, err)
	}
	if st.snaps, err = raft.NewFileSnapshotStore(filepath.Join(cfg.Dir, "snapshots"), 2, io.Discard); err != nil {
		st.close()
		return nil, nil, fmt.Errorf("cluster: raft snapshots in %s: %w", cfg.Dir, err)
	}
	// The transport's timeout bounds one RPC's I/O; 10 pooled connections
	// per peer keep appends and votes apart. Pipelined replication is off
	// (MaxRPCsInFlight 1): in raft v1.7.3, when a follower answers an
	// append with Success=false (a restarted member whose log is behind),
	// the pipeline's decoder returns while the sender parks on its
	// in-flight channel; replication to that member stops for good (it
	// never catches up with the failover state) and Shutdown waits on
	// the parked sender forever (seen in TestMember_RestartedMemberRejoinsAsStandby;
	// grafana/pyroscope#5518 found the same). The failover state commits
	// a few entries a second: one append in flight per peer is plenty.
	stream := cfg.RaftStream
	if stream == nil {
		if stream, err = newTCPLayer(cfg.RaftAddr); err != nil {
			st.close()
			return nil, nil, fmt.Errorf("cluster: raft transport on %s: %w", cfg.RaftAddr, err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("member", cfg.ID)
	var watch *deathWatch
	if cfg.Timeouts.DeathWatch > 0 {
		watch = newDeathWatch(cfg.ID, cfg.Timeouts, log)
	}
	stream = &watchLayer{StreamLayer: stream, w: watch}
	st.watch = watch
	st.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          stream,
		MaxPool:         10,
		MaxRPCsInFlight: 1,
		Timeout:         2 * time.Second,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "raft-net", Output: io.Discard}),
	})
	rc := raftConfig(cfg)
	has, err := raft.HasExistingState(st.bolt, st.bolt, st.snaps)
	if err != nil {
		st.close()
		return nil, nil, fmt.Errorf("cluster: raft state in %s: %w", cfg.Dir, err)
	}
	if has {
		if st.startIndex, err = lastIndexOnDisk(st); err != nil {
			st.close()
			return nil, nil, fmt.Errorf("cluster: raft state in %s: %w", cfg.Dir, err)
		}
	}
	if !has && !cfg.Join {
		var servers []raft.Server
		for _, m := range cfg.Members {
			suf := raft.Voter
			if m.Role == fsm.Nonvoter {
				suf = raft.Nonvoter
			}
			servers = append(servers, raft.Server{Suffrage: suf, ID: serverID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
		}
		if err := raft.BootstrapCluster(rc, st.bolt, st.bolt, st.snaps, st.trans, raft.Configuration{Servers: servers}); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			st.close()
			return nil, nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, f, st.bolt, st.bolt, st.snaps, st.trans)
	if err != nil {
		st.close()
		return nil, nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	if watch != nil {
		watch.raft.Store(&raftHandle{r: r, trans: st.trans, id: rc.LocalID})
	}
	if cfg.Timeouts.PromptCheck > 0 {
		st.prompt = &promptCheck{r: promptHandle{r}, self: cfg.ID, heartbeat: cfg.Timeouts.Heartbeat, stagger: cfg.Timeouts.PromptCheck, log: log}
		st.stopPrompt = make(chan struct{})
		go st.prompt.run(st.stopPrompt)
	}
	return r, st, nil
}

// lastIndexOnDisk is the last index of the Raft log in st, or of its
// newest snapshot when that is newer (the log was compacted).
func lastIndexOnDisk(st *raftStores) (uint64, error) {
	last, err := st.bolt.LastIndex()
	if err != nil {
		return 0, err
	}
	snaps, err := st.snaps.List()
	if err != nil {
		return 0, err
	}
	if len(snaps) > 0 {
		last = max(last, snaps[0].Index)
	}
	return last, nil
}
