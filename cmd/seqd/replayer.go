package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/tcp"
)

// replayerFlag is --replayer, repeatable: the repair sources a node, a
// tail or a replayer NAKs when the sequencer's ring says Gone.
func replayerFlag() cli.Flag {
	return altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "replayer", EnvVars: []string{options.EnvName("replayer")},
		Usage: "a replayer's NAK address (host:port; repeat for several, or comma-separated in the variable): asked for what the sequencer's ring no longer holds"})
}

// rewindServe, when set (the rewind server), serves rewinds over TCP on
// addr from the replayer's store until ctx ends; it reads the store on
// the service's goroutine through Service.Do.
var rewindServe func(ctx context.Context, svc *replayer.Service, addr string, log *slog.Logger) error

func replayerCommand() *cli.Command {
	d := replayer.DefaultServiceConfig()
	flags, before := options.WithConfig(append(append(transportFlags(false),
		options.String("dir", "", "the store's directory: one session's segment files (created if missing)"),
		options.Uint("session", 0, "the session to store (0: the one already in --dir, or else the first heard)"),
		options.String("nak-addr", "127.0.0.1:9300", "address the replayer answers NAKs on: UDP host:port with --transport udp, TCP with tcp (nodes name it with --replayer)"),
		options.String("rewind-addr", "", "TCP address to serve rewinds on (empty: none)"),
		replayerFlag(),
		options.Bool("from-live", false, "an empty store starts at the live tail instead of fetching the session from seq 1"),
		options.Bool("read-only", false, "report as read-only to the sequencer's flow control, which then never waits for this replayer (it may then fall off the ring and stop)"),
		options.String("store.fsync", d.Store.Sync.String(), "none | interval | always: when appended packets are fsynced"),
		options.Duration("store.fsync-interval", d.Store.SyncInterval, "with fsync interval: fsync this often while appending"),
		options.Int("store.fsync-bytes", int(d.Store.SyncBytes), "with fsync interval: fsync after this many bytes too"),
		options.Int("store.segment-bytes", int(d.Store.SegmentBytes), "segment file size (a new one is started past it)"),
		options.Int("store.max-packet-bytes", d.Store.MaxPacketBytes, "largest stream packet stored (at least the sequencer's max packet bytes)"),
		options.Int("repair.nak-answer-bytes", d.Repair.NakAnswerBytes, "most bytes retransmitted for one NAK, at least one packet"),
		options.Int("repair.retransmit-bytes-per-second", int(d.Repair.RetransmitBytesPerSecond), "bandwidth cap of all repairs (0: none)"),
		options.Duration("repair.multicast-repair-window", d.Repair.MulticastRepairWindow, "a second receiver asking for the same seq within this window gets a multicast answer (0: always unicast)"),
		options.Int("store.max-pending-bytes", d.MaxPendingBytes, "frames held back while a hole before them is repaired (beyond it the replayer stops)"),
		streamWarnFlag(),
		&cli.BoolFlag{Name: "dry-run", Usage: "validate the configuration, print it and exit"},
	), append(adminServeFlags(true), gossipFlags(true)...)...))
	return &cli.Command{
		Name:  "replayer",
		Usage: "persist the stream to segment files and answer NAKs for what the sequencer's ring no longer holds",
		Description: `Follows the stream (from after the newest seq in --dir; an empty store from
seq 1, or the live tail with --from-live), stores every stable packet as it
was published, and answers NAKs on --nak-addr with the sequencer's repair
policy. On start it logs what recovery found in --dir (a torn tail cut
after a crash, a corruption).

Prints "replayer: ready ..." once serving and "replayer: stopped ..." when
it stops. Exit status: 0 when SIGTERM or SIGINT stopped it (the store is
fsynced and closed first); 1 on any error.`,
		Flags:  flags,
		Before: before,
		Action: runReplayer,
	}
}

func runReplayer(c *cli.Context) error {
	log := options.NewLogger(c)
	ctx := c.Context
	cfg := replayer.DefaultServiceConfig()
	cfg.Dir = c.String("dir")
	if cfg.Dir == "" {
		return options.KeyError("dir", `""`, "the store's directory")
	}
	cfg.Logger = log
	cfg.Store.Session = c.Uint64("session")
	var err error
	if cfg.Store.Sync, err = replayer.ParseSyncPolicy(c.String("store.fsync")); err != nil {
		return options.KeyError("store.fsync", fmt.Sprintf("%q", c.String("store.fsync")), "one of: none, interval, always")
	}
	cfg.Store.SyncInShell = cfg.Store.Sync == replayer.SyncInterval
	cfg.Store.SyncInterval = c.Duration("store.fsync-interval")
	cfg.Store.SyncBytes = int64(c.Int("store.fsync-bytes"))
	cfg.Store.SegmentBytes = int64(c.Int("store.segment-bytes"))
	cfg.Store.MaxPacketBytes = c.Int("store.max-packet-bytes")
	cfg.Repair.MaxPacketBytes = cfg.Store.MaxPacketBytes
	cfg.Repair.NakAnswerBytes = c.Int("repair.nak-answer-bytes")
	cfg.Repair.RetransmitBytesPerSecond = int64(c.Int("repair.retransmit-bytes-per-second"))
	cfg.Repair.MulticastRepairWindow = c.Duration("repair.multicast-repair-window")
	cfg.MaxPendingBytes = c.Int("store.max-pending-bytes")
	cfg.FromLive = c.Bool("from-live")
	cfg.Receiver.ReadOnly = c.Bool("read-only")
	cfg.Sources = c.StringSlice("replayer")
	if err := cfg.Validate(); err != nil {
		return err // names the field; its key is store.* or repair.*
	}
	kind := c.String("transport")
	if err := validateTransport(c, false); err != nil {
		return err
	}
	nakAddr := c.String("nak-addr")
	if c.String("rewind-addr") != "" && rewindServe == nil {
		return options.KeyError("rewind-addr", fmt.Sprintf("%q", c.String("rewind-addr")), "empty: this build has no rewind server yet")
	}
	if c.Bool("dry-run") {
		fmt.Printf("replayer: config transport=%s dir=%s session=%d nak_addr=%s fsync=%s fsync_interval=%v segment_bytes=%d replayers=%v\n",
			kind, cfg.Dir, cfg.Store.Session, nakAddr, cfg.Store.Sync, cfg.Store.SyncInterval, cfg.Store.SegmentBytes, cfg.Sources)
		return nil
	}
	if ctx.Err() != nil {
		fmt.Println("replayer: stopped contiguous=0 durable=0")
		return nil
	}
	tier := c.Int("gossip.tier")
	if tier < 1 || tier > 255 {
		return options.KeyError("tier", strconv.Itoa(tier), "1..255")
	}
	// One replayer per directory: a second one would append to the
	// same segment.
	lock, err := replayer.LockDir(cfg.Dir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	serveRewind := rewindServe
	if a := c.String("rewind-addr"); a != "" {
		l, err := listenRewind(a)
		if err != nil {
			return err
		}
		defer l.Close()
		if l, err = tlsListener(c, l); err != nil {
			return err
		}
		serveRewind = func(ctx context.Context, svc *replayer.Service, _ string, log *slog.Logger) error {
			return serveRewindsOnStore(ctx, svc, l, log)
		}
	}
	var follow transport.Client
	var up *tiered.Upstream
	if tier >= 2 {
		// Tier 2 follows a tier-1 replayer's store over TCP, not the stream.
		if up, err = newUpstream(c, log, cfg.Store.Session); err != nil {
			return err
		}
		cfg.Upstream = true
		follow = up
	} else {
		if c.String("upstream") != "" {
			return options.KeyError("upstream", fmt.Sprintf("%q", c.String("upstream")), "empty with --tier 1 (a tier-1 replayer follows the stream; --tier 2 follows an upstream)")
		}
		if follow, err = openClient(c, log, "replayer"); err != nil {
			return err
		}
	}
	defer follow.Close()
	srv, err := openNakServer(c, nakAddr)
	if err != nil {
		return err
	}
	defer srv.Close()
	svc, err := replayer.NewService(cfg, follow, srv)
	if err != nil {
		return err
	}
	asv, err := serveAdmin(c, ops.ReplayerSurface(adminAuth(c, log), svc, rewindStats, nakAddr, c.String("rewind-addr")), log)
	if err != nil {
		return err
	}
	if asv != nil {
		defer asv.Close()
	}
	agent, err := startReplayerGossip(c, ctx, log, svc, nakAddr, c.String("rewind-addr"))
	if err != nil {
		return err
	}
	if agent != nil {
		defer agent.Close()
	}
	err = tiered.RunReplayer(ctx, svc, tiered.ReplayerRun{Transport: kind, NakAddr: nakAddr, Dir: cfg.Dir,
		Follow: follow, Where: listenAddress(c), WarnAfter: c.Duration("stream-warn-after"),
		Upstream: up, Tier: tier, UpstreamName: cmp.Or(c.String("upstream"), "gossip"), Session: cfg.Store.Session, Agent: agent,
		RewindAddr: c.String("rewind-addr"), RewindServe: serveRewind, Out: os.Stdout, Log: log})
	if errors.Is(err, context.Canceled) {
		log.Info("replayer stopped", "signal", fmt.Sprint(stopsignal.Received()))
		return nil
	}
	return err
}

// newUpstream is the follow client of `seqd replayer --tier 2`: the
// --upstream addresses, and gossip's choice once the Agent runs.
func newUpstream(c *cli.Context, log *slog.Logger, session uint64) (*tiered.Upstream, error) {
	cfg := tiered.DefaultUpstreamConfig()
	cfg.Addrs = rewindAddrs(c.String("upstream"))
	if len(cfg.Addrs) == 0 && !gossipOn(c) {
		return nil, options.KeyError("upstream", `""`, "with --tier 2: a tier-1 replayer's rewind address (its --rewind-addr), or --gossip to find one")
	}
	if len(c.StringSlice("replayer")) > 0 {
		return nil, options.KeyError("replayer", fmt.Sprint(c.StringSlice("replayer")), "empty with --tier 2 (the upstream's TCP stream has no gaps to repair)")
	}
	cfg.Session = session
	cfg.FromOldest = c.Bool("from-live")
	cfg.FailoverWait = c.Duration("upstream.failover-wait")
	cfg.Logger = log
	cfg.TLS = rewindTLS(c)
	if len(cfg.Addrs) == 0 {
		// Gossip names the upstream (SetSource after the Agent starts).
		cfg.Source = func(uint64, string) string { return "" }
	}
	up, err := tiered.NewUpstream(cfg)
	if err != nil {
		return nil, options.KeyError("upstream.failover-wait", c.Duration("upstream.failover-wait").String(), err.Error())
	}
	return up, nil
}

// openNakServer opens the replayer's NAK endpoint: a UDP socket bound to
// addr (answers unicast from it, multicast answers to the stream group)
// or a TCP listener.
func openNakServer(c *cli.Context, addr string) (transport.Server, error) {
	if c.String("transport") == "tcp" {
		tc := tcp.DefaultConfig()
		tc.Addr = addr
		id, err := tlsIdentity(c)
		if err != nil {
			return nil, err
		}
		tc.TLS = id              // the nodes' repair sources dial it with theirs
		tc.Auth = processAuth(c) // answers signed with the stream key, NAKs verified
		s, err := tcp.NewServer(tc)
		if err != nil {
			return nil, fmt.Errorf("nak-addr: %w", err)
		}
		return s, nil
	}
	s, err := multicast.NewRepairServer(multicastConfig(c, fault.Config{}), addr)
	if err != nil {
		return nil, fmt.Errorf("nak-addr %s: %w", addr, err)
	}
	return s, nil
}
