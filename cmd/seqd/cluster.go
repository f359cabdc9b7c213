package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/test/drill"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/open"
)

// clusterFlags are the keys of `seqd sequencer --cluster`.
func clusterFlags() []cli.Flag {
	return append([]cli.Flag{
		options.Bool("cluster", false, "run as a member of a Raft sequencer group (primary while Raft leader, standby otherwise) instead of alone"),
		options.Uint("id", 0, "cluster: this member's id (>= 1)"),
		options.String("dir", "", "cluster: directory of the raft log (raft.db), raft snapshots and the standby's stream store"),
		options.String("raft-addr", "", "cluster: host:port of this member's Raft transport (default: its entry in --peers)"),
		options.String("admin-addr", "", "host:port of the admin endpoint (HTTP: status, commands, /metrics, /healthz, /readyz); cluster: for seqd admin (default: its entry in --peers); standalone: empty for none; off loopback it needs --admin-token"),
		// --fetch-addr is the old name of --peer-addr (the fetch port
		// became the peer port): still accepted.
		options.StringAlias("peer-addr", "fetch-addr", "", "cluster: host:port of this member's peer port, where the other members seal it and fetch its stored stream (default: its entry in --peers; --fetch-addr is an alias)"),
		options.String("peers", "", "cluster: every member, this one included: ID@RAFT_ADDR@ADMIN_ADDR@PEER_ADDR,... (used to bootstrap a new cluster)"),
		options.String("timeouts", "lan", "cluster: timing profile: lan (300 ms heartbeat and election, 290 ms lease; a killed primary is replaced in ~20 ms by the death watch) | wan (1 s, lease 500 ms) | test (300 ms, no prompt check)"),
		options.String("standby.ack", standbyAck(cluster.DefaultDataConfig()), "cluster: what a standby acks, so what stable means: written (the record is in its store's file: it survives the process, and a quorum of processes on separate machines is the durability, as in Aeron Cluster and Kafka) | durable (fsynced first: survives a power loss of the whole group, and costs one fsync in every safe-mode round trip, about 1-4 ms)"),
		options.Bool("join", false, "cluster: join a running cluster instead of bootstrapping (then: seqd admin add-member on the primary)"),
	}, append(append(adminServeFlags(false), faultFlags()...), memberGossipFlags()...)...)
}

// clusterOnlyKeys are the keys that mean a cluster member: given without
// --cluster, the user forgot it (a standalone sequencer ignored them).
var clusterOnlyKeys = []string{"id", "peers", "raft-addr", "join"}

// clusterOnly refuses cluster keys given to a standalone sequencer.
func clusterOnly(c *cli.Context) error {
	for _, k := range clusterOnlyKeys {
		if c.IsSet(k) {
			return fmt.Errorf("--%s is a cluster key, and --cluster is not given: add --cluster to run a member of a sequencer group, or drop --%s (a standalone sequencer takes none of --%s)",
				k, k, strings.Join(clusterOnlyKeys, ", --"))
		}
	}
	return nil
}

// standbyAck is the --standby.ack name of a data path's ack mode.
func standbyAck(d cluster.DataConfig) string {
	if d.AckWritten {
		return "written"
	}
	return "durable"
}

// clusterConfig reads the cluster keys into a cluster.MemberConfig; seq is the
// sequencer template the flags built.
func clusterConfig(c *cli.Context, seq sequencer.Config, log *slog.Logger) (cluster.MemberConfig, error) {
	cfg := cluster.DefaultMemberConfig()
	cfg.ID = c.Uint64("id")
	cfg.Dir = c.String("dir")
	cfg.Join = c.Bool("join")
	cfg.Sequencer = seq
	cfg.IdleSpin = c.Duration("sequencer.idle-spin")
	cfg.Logger = log
	prof, ok := cluster.Profiles[c.String("timeouts")]
	if !ok {
		return cfg, options.OneOf("timeouts", c.String("timeouts"), "lan", "wan", "test")
	}
	cfg.Timeouts = prof()
	ms, err := parseMembers(c.String("peers"))
	if err != nil {
		return cfg, options.KeyError("peers", fmt.Sprintf("%q", c.String("peers")), err.Error())
	}
	cfg.Members = ms
	for _, m := range ms {
		if m.ID == cfg.ID {
			cfg.RaftAddr, cfg.AdminAddr = m.RaftAddr, m.AdminAddr
		}
	}
	if a := c.String("raft-addr"); a != "" {
		cfg.RaftAddr = a
	}
	if a := c.String("admin-addr"); a != "" {
		cfg.AdminAddr = a
	}
	cfg.AdminAuth = adminAuth(c, log)
	if err := cfg.AdminAuth.CheckListen("admin-addr", cfg.AdminAddr); err != nil {
		return cfg, err
	}
	id, err := tlsIdentity(c)
	if err != nil {
		return cfg, err
	}
	if id != nil && id.Name() != cluster.MemberName(cfg.ID) {
		return cfg, options.KeyError("security.tls-cert", fmt.Sprintf("%q (certificate of %s)", c.String("security.tls-cert"), id.Name()), "the certificate of "+cluster.MemberName(cfg.ID)+" (--id "+fmt.Sprint(cfg.ID)+")")
	}
	cfg.TLS = id
	if cfg.Dir == "" {
		return cfg, options.KeyError("dir", `""`, "a directory for the raft log, snapshots and stream store")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, options.Keyed(err, clusterKeys)
	}
	return cfg, nil
}

var clusterKeys = map[string]string{
	"ID":        "id",
	"Dir":       "dir",
	"RaftAddr":  "raft-addr",
	"AdminAddr": "admin-addr",
	"Members":   "peers",
}

// peerAddr is this member's peer address: --peer-addr (or its alias
// --fetch-addr), or its entry in --peers.
func peerAddr(c *cli.Context, cfg cluster.MemberConfig) string {
	if a := c.String("peer-addr"); a != "" {
		return a
	}
	for _, m := range cfg.Members {
		if m.ID == cfg.ID {
			return m.StreamAddr
		}
	}
	return ""
}

// runClusterSequencer runs one member of a sequencer group
// (cluster.Process: its standby all the time, primary while it is the
// Raft leader), printing its role changes (Process.Serve).
func runClusterSequencer(c *cli.Context, seq sequencer.Config, log *slog.Logger) error {
	ctx := c.Context
	cfg, err := clusterConfig(c, seq, log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	switch c.String("transport") {
	case "udp":
	case "tcp", "hybrid":
		// hybrid: the primary serves both; standbys follow over UDP.
		if err := clusterTCPListen(c, cfg); err != nil {
			return err
		}
	default:
		return options.OneOf("transport", c.String("transport"), open.ServerKinds...)
	}
	// --fault-addr (drills): Raft and the stream sockets go through
	// switchable fault injection (test/drill.Faults).
	flt, err := drill.StartFaults(c.String("fault-addr"), c.Uint64("fault-seed"), &cfg, log)
	if err != nil {
		return options.Keyed(err, map[string]string{"FaultAddr": "fault-addr"})
	}
	defer flt.Close()
	data := cluster.DefaultDataConfig()
	data.Dir, data.PeerAddr = filepath.Join(cfg.Dir, "stream"), peerAddr(c, cfg)
	data.IdleSpin = c.Duration("sequencer.idle-spin")
	switch ack := c.String("standby.ack"); ack {
	case "written", "durable":
		data.AckWritten = ack == "written"
	default:
		return options.OneOf("standby.ack", ack, "written", "durable")
	}
	// The stream server of the epoch this member sequences now (or
	// last), for its /metrics.
	var primarySrv atomic.Pointer[transport.Server]
	p, err := cluster.NewProcess(cfg, data, cluster.Opens{
		Client: func() (transport.Client, error) {
			cl, err := openClient(c, log, "standby")
			if err != nil {
				return nil, err
			}
			return flt.Client(cl)
		},
		Server: func() (transport.Server, error) {
			s, err := openServer(c, log)
			if err != nil {
				return nil, err
			}
			primarySrv.Store(&s)
			return flt.Server(s)
		},
	})
	if err != nil {
		return err
	}
	defer p.Close()
	// The standby's counters join the member's own (status, Raft, the
	// primary's sequencer) on its /metrics.
	p.Member.Surface().Registry.MustRegister(ops.NewStandbyCollector(p.StandbyStats),
		ops.NewTransportCollector("standby", func() transport.Counters { c, _ := p.StandbyCounters(); return c }),
		ops.NewTransportCollector("primary", func() transport.Counters {
			if s := primarySrv.Load(); s != nil {
				if st, ok := (*s).(transport.Stats); ok {
					return st.Counters()
				}
			}
			return transport.Counters{}
		}))
	if a := c.String("console-addr"); a != "" {
		// The console serves the member's surface (its HTTP endpoint is
		// the member's own, on --admin-addr).
		sv, err := ops.Serve(ctx, p.Member.Surface(), cfg.AdminAuth, "admin-addr", "", "console-addr", a)
		if err != nil {
			return err
		}
		defer sv.Close()
		log.Info("admin console", "addr", sv.ConsoleAddr())
	}
	if g, err := startMemberGossip(c, log, p.Member); err != nil {
		return err
	} else if g != nil {
		defer g.Close()
	}
	log.Info("cluster member serving", "id", cfg.ID, "raft", cfg.RaftAddr, "admin", p.Member.AdminAddr(), "pid", os.Getpid())
	return p.Serve(ctx, os.Stdout)
}

// clusterTCPListen sets --tcp.listen, unless given, to this member's
// entry in --tcp.addr (the members' stream addresses, in the order of
// --peers): the member serves the stream there while it is primary, and
// its standby follows the primary among the others.
func clusterTCPListen(c *cli.Context, cfg cluster.MemberConfig) error {
	if c.IsSet("tcp.listen") {
		return nil
	}
	addrs := tcpAddrs(c)
	if len(addrs) == 1 {
		return c.Set("tcp.listen", addrs[0]) // one address: members on different hosts
	}
	for i, m := range cfg.Members {
		if m.ID != cfg.ID {
			continue
		}
		if i >= len(addrs) {
			return options.KeyError("tcp.addr", fmt.Sprintf("%q", c.String("tcp.addr")), fmt.Sprintf("one stream address per member of --peers (member %d is number %d), or --tcp.listen", cfg.ID, i+1))
		}
		return c.Set("tcp.listen", addrs[i])
	}
	return options.KeyError("tcp.listen", `""`, fmt.Sprintf("this member's stream address (member %d is not in --peers)", cfg.ID))
}
