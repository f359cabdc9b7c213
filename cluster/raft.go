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
	"github.com/seqd/seqd/internal/config"
)

// RaftDeps are what a member's Raft runs on, as raft.NewRaft takes them:
// its log store, stable store, snapshot store and transport. In
// production OpenRaft builds them (raft-boltdb/v2, file snapshots, raft's
// TCP transport with the death watch); unit tests hand in hashicorp/raft's
// in-memory twins (raft.NewInmemStore, raft.NewInmemSnapshotStore,
// raft.NewInmemTransport). Stores that hold state make the member restart
// on it: the Member bootstraps a new cluster only into empty stores.
type RaftDeps struct {
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	Transport raft.Transport
	// Close releases them once Raft has shut down (nil: nothing to
	// release).
	Close func() error
	// watch is the death watch on the transport's connections (OpenRaft's,
	// nil when Timeouts.DeathWatch is 0 or the transport is another).
	watch *deathWatch
}

func (d RaftDeps) validate() error {
	if d.Logs == nil || d.Stable == nil || d.Snapshots == nil || d.Transport == nil {
		return fmt.Errorf("%w: Deps.Raft needs a log store, a stable store, a snapshot store and a transport (OpenRaft)", ErrConfig)
	}
	return nil
}

// raftStores is a running member's Raft dependencies and what it learned
// from them at start.
type raftStores struct {
	deps RaftDeps
	// watch is the death watch on the transport's accepted connections
	// (nil when Timeouts.DeathWatch is 0, or on another transport).
	watch *deathWatch
	// prompt is the prompt heartbeat check (nil unless
	// Timeouts.PromptCheck); closing stopPrompt ends it.
	prompt     *promptCheck
	stopPrompt chan struct{}
	// startIndex is the last index of the Raft log (or snapshot) found in
	// the stores at start: 0 for a new member. A restarted member opens
	// its standby once the failover state has caught up past it
	// (Member.Run).
	startIndex uint64
	// log is raft's logger when it is the member's (nil with
	// MemberConfig.RaftLog): quieted when the member stops.
	log *raftLog
}

// quiet turns raft's warnings and errors into debug lines: the member is
// stopping, and its peers' going away with it is no news.
func (s *raftStores) quiet() {
	if s.log != nil {
		s.log.quiet.Store(true)
	}
}

func (s *raftStores) close() {
	if s.stopPrompt != nil {
		close(s.stopPrompt)
		s.stopPrompt = nil
	}
	if s.deps.Close != nil {
		if err := s.deps.Close(); err != nil {
			slog.Default().Warn("cluster: close the raft stores", "err", err)
		}
		s.deps.Close = nil
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
	if cfg.RaftLog != nil {
		rc.Logger = hclog.New(&hclog.LoggerOptions{
			Name:   "raft-" + strconv.FormatUint(cfg.ID, 10),
			Level:  hclog.Warn,
			Output: cfg.RaftLog,
		})
		return rc
	}
	// Through the member's logger, at mapped levels (raftlog.go).
	rc.Logger = newRaftLog(memberLog(cfg), "raft")
	return rc
}

// OpenRaft opens a member's production Raft dependencies: the log and
// stable store in cfg.Dir/raft.db (raft-boltdb/v2), file snapshots in
// cfg.Dir/snapshots, and raft's TCP transport on cfg.RaftAddr (or over
// cfg.RaftStream), watched by the death watch when Timeouts.DeathWatch is
// set. Hand them to NewMember in Deps.Raft; the Member closes them.
func OpenRaft(cfg MemberConfig) (RaftDeps, error) {
	if cfg.Dir == "" {
		return RaftDeps{}, config.New(ErrConfig, "Dir", cfg.Dir, "a directory for the raft log and snapshots")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return RaftDeps{}, fmt.Errorf("cluster: %w", err)
	}
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(cfg.Dir, "raft.db"))
	if err != nil {
		return RaftDeps{}, fmt.Errorf("cluster: raft store in %s: %w", cfg.Dir, err)
	}
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(cfg.Dir, "snapshots"), 2, io.Discard)
	if err != nil {
		bolt.Close()
		return RaftDeps{}, fmt.Errorf("cluster: raft snapshots in %s: %w", cfg.Dir, err)
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
			bolt.Close()
			return RaftDeps{}, fmt.Errorf("cluster: raft transport on %s: %w", cfg.RaftAddr, err)
		}
	}
	if cfg.TLS != nil {
		stream = newTLSLayer(stream, cfg.TLS, memberLog(cfg))
	}
	var watch *deathWatch
	if cfg.Timeouts.DeathWatch > 0 {
		watch = newDeathWatch(cfg.ID, cfg.Timeouts, memberLog(cfg))
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          &watchLayer{StreamLayer: newLimitLayer(stream, raftMaxInbound, raftIdleTimeout), w: watch},
		MaxPool:         10,
		MaxRPCsInFlight: 1,
		Timeout:         2 * time.Second,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "raft-net", Output: io.Discard}),
	})
	return RaftDeps{
		Logs: bolt, Stable: bolt, Snapshots: snaps, Transport: trans, watch: watch,
		Close: func() error {
			return errors.Join(trans.Close(), bolt.Close())
		},
	}, nil
}

// memberLog is cfg's logger (slog.Default when nil) with the member's id.
func memberLog(cfg MemberConfig) *slog.Logger {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return log.With("member", cfg.ID)
}

// openRaft opens the production dependencies (OpenRaft) and starts Raft
// on them (startRaft).
func openRaft(cfg MemberConfig, f *fsm.FSM) (*raft.Raft, *raftStores, error) {
	d, err := OpenRaft(cfg)
	if err != nil {
		return nil, nil, err
	}
	return startRaft(cfg, f, d)
}

// startRaft bootstraps a new cluster from cfg.Members when d's stores are
// empty (unless cfg.Join), and starts Raft with f on d. On an error d is
// closed.
func startRaft(cfg MemberConfig, f *fsm.FSM, d RaftDeps) (*raft.Raft, *raftStores, error) {
	st := &raftStores{deps: d, watch: d.watch}
	rc := raftConfig(cfg)
	st.log, _ = rc.Logger.(*raftLog)
	has, err := raft.HasExistingState(d.Logs, d.Stable, d.Snapshots)
	if err != nil {
		st.close()
		return nil, nil, fmt.Errorf("cluster: raft state of member %d: %w", cfg.ID, err)
	}
	if has {
		if st.startIndex, err = lastIndexOnDisk(d); err != nil {
			st.close()
			return nil, nil, fmt.Errorf("cluster: raft state of member %d: %w", cfg.ID, err)
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
		if err := raft.BootstrapCluster(rc, d.Logs, d.Stable, d.Snapshots, d.Transport, raft.Configuration{Servers: servers}); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			st.close()
			return nil, nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, f, d.Logs, d.Stable, d.Snapshots, d.Transport)
	if err != nil {
		st.close()
		return nil, nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	if st.watch != nil {
		st.watch.raft.Store(&raftHandle{r: r, trans: d.Transport, id: rc.LocalID})
	}
	if cfg.Timeouts.PromptCheck > 0 {
		st.prompt = &promptCheck{r: promptHandle{r}, self: cfg.ID, heartbeat: cfg.Timeouts.Heartbeat, stagger: cfg.Timeouts.PromptCheck, log: memberLog(cfg)}
		st.stopPrompt = make(chan struct{})
		go st.prompt.run(st.stopPrompt)
	}
	return r, st, nil
}

// lastIndexOnDisk is the last index of the Raft log in d, or of its
// newest snapshot when that is newer (the log was compacted).
func lastIndexOnDisk(d RaftDeps) (uint64, error) {
	last, err := d.Logs.LastIndex()
	if err != nil {
		return 0, err
	}
	snaps, err := d.Snapshots.List()
	if err != nil {
		return 0, err
	}
	if len(snaps) > 0 {
		last = max(last, snaps[0].Index)
	}
	return last, nil
}
