package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/sequencer/solo"
	"github.com/seqd/seqd/test/bench"
	"github.com/seqd/seqd/transport"
)

func sequencerCommand() *cli.Command {
	d := sequencer.DefaultConfig()
	flags, before := options.WithConfig(append(append(transportFlags(true),
		options.Uint("session", 0, "session id (0: the start time in ns)"),
		options.Int("sequencer.max-packet-bytes", 0, "largest stream datagram (UDP payload); 0: the path MTU (1472 on Ethernet, 65507 on loopback)"),
		options.Duration("sequencer.heartbeat-interval", d.HeartbeatInterval, "heartbeat when idle this long"),
		options.Duration("sequencer.max-heartbeat-interval", d.MaxHeartbeatInterval, "while the stream stays idle, heartbeats double their interval up to this (0: a fixed heartbeat-interval); the first after a packet still comes after heartbeat-interval"),
		options.Int("sequencer.ring-bytes", d.RingBytes, "bytes of published packets kept for repair (memory grows to it as the ring fills)"),
		options.Int("sequencer.nak-answer-bytes", d.NakAnswerBytes, "most bytes retransmitted for one NAK, at least one packet (the receiver asks again for the rest)"),
		options.Int("sequencer.retransmit-bytes-per-second", 256<<20, "bandwidth cap of all repairs, so a NAK storm cannot starve the stream (0: none)"),
		options.Duration("sequencer.multicast-repair-window", d.MulticastRepairWindow, "a second receiver asking for the same seq within this window gets a multicast answer (0: always unicast)"),
		options.Int("sequencer.max-message-bytes", d.MaxMessageBytes, "largest command payload"),
		options.Int("sequencer.max-reassembly-bytes", d.MaxReassemblyBytes, "memory for commands being reassembled from fragments, all senders together (a command beyond it is rejected)"),
		options.Duration("sequencer.reassembly-timeout", d.ReassemblyTimeout, "a command in reassembly that gets no fragment this long is dropped, freeing its memory"),
		options.Int("sequencer.max-senders", d.MaxSenders, "senders (account, instance) in the dedupe table; the same on every sequencer of a group"),
		options.Duration("sequencer.sender-idle-timeout", d.SenderIdleTimeout, "a full sender table forgets the least recently active sender only if it had no record this long (else the newcomer is rejected)"),
		options.Int("sequencer.max-timers-per-sender", d.MaxTimersPerSender, "centralized timers one sender may hold (one more is rejected)"),
		options.Duration("sequencer.min-timer-period", d.MinTimerPeriod, "shortest period of a periodic centralized timer (a shorter one is rejected)"),
		options.Int("sequencer.max-timer-fires-per-second", d.MaxTimerFiresPerSecond, "how often one sender's periodic timers may fire together (a timer beyond it is rejected)"),
		options.Int("sequencer.flow-window-percent", d.FlowWindowPercent, "the stream runs at most this share of ring-bytes ahead of the slowest sending node, so none falls off the ring (read-only nodes never slow it; 0: no flow control)"),
		options.Duration("sequencer.flow-receiver-timeout", d.FlowReceiverTimeout, "a node silent this long no longer holds the stream back"),
		options.Int("sequencer.max-receivers", d.MaxReceivers, "receivers whose positions are tracked (the least recently heard is forgotten)"),
		options.Duration("sequencer.active-timeout", defaultActiveTimeout, "hot-hot: when an account's active instance is silent this long (commands and heartbeats) and another instance was heard within it, the other becomes active (0: never switch)"),
		options.Duration("sequencer.idle-spin", 0, "keep polling without blocking this long after each frame (lower latency, costs a core); in a cluster, the primary and the standbys"),
		options.Duration("sequencer.listen-before-start", 200*time.Millisecond, "listen on the stream this long before starting, and refuse to start if another session is live there (0: do not listen)"),
		&cli.BoolFlag{Name: "force", Usage: "start even if another session is live on these groups: its nodes ignore the new session while it publishes and STOP ONCE IT FALLS SILENT (they see a new session); for replacing a sequencer known to be wrong"},
		&cli.StringFlag{Name: "publish-times", Usage: "note when each stream packet went to the kernel and write it (first_seq count unix_ns) to this file on stop; for seqd bench's latency breakdown"},
		&cli.BoolFlag{Name: "dry-run", Usage: "validate the configuration, print it and exit"},
	), clusterFlags()...))
	return &cli.Command{
		Name:  "sequencer",
		Usage: "run a sequencer: alone, or with --cluster as a member of a Raft group of three (or five)",
		Description: `Before it starts, listens on the stream for sequencer.listen-before-start
and refuses to start if another session is live there: a second sequencer
on the same groups would share them (the first's nodes ignore it while the
first publishes, and stop once it falls silent; --force overrides).

Prints "sequencer: ready ..." once serving and "sequencer: stopped ..." when
it stops. Exit status: 0 when SIGTERM or SIGINT stopped it (during start-up
too, with the stopped line); 1 on any error.`,
		Flags:  flags,
		Before: before,
		Action: runSequencer,
	}
}

// stoppedInStartup ends a sequencer that was asked to stop (SIGTERM,
// SIGINT) before it served: exit status 0 and the stopped line, as for a
// stop while serving.
func stoppedInStartup(log *slog.Logger) error {
	fmt.Println(solo.StoppedLine(0, sequencer.Stats{}, 0))
	log.Info("sequencer stopped during start-up", "signal", fmt.Sprint(stopsignal.Received()))
	return nil
}

func runSequencer(c *cli.Context) error {
	log := options.NewLogger(c)
	ctx := c.Context // done on SIGTERM or SIGINT, even one sent during start-up
	cfg := sequencer.DefaultConfig()
	cfg.Session = c.Uint64("session")
	if cfg.Session == 0 {
		cfg.Session = uint64(time.Now().UnixNano())
	}
	cfg.Epoch = 1
	var err error
	if cfg.MaxPacketBytes, err = packetBytes(c, "sequencer.max-packet-bytes"); err != nil {
		return err
	}
	cfg.HeartbeatInterval = c.Duration("sequencer.heartbeat-interval")
	cfg.MaxHeartbeatInterval = c.Duration("sequencer.max-heartbeat-interval")
	cfg.RingBytes = c.Int("sequencer.ring-bytes")
	cfg.NakAnswerBytes = c.Int("sequencer.nak-answer-bytes")
	cfg.MaxMessageBytes = c.Int("sequencer.max-message-bytes")
	cfg.MaxReassemblyBytes = c.Int("sequencer.max-reassembly-bytes")
	cfg.ReassemblyTimeout = c.Duration("sequencer.reassembly-timeout")
	cfg.MaxSenders = c.Int("sequencer.max-senders")
	cfg.SenderIdleTimeout = c.Duration("sequencer.sender-idle-timeout")
	cfg.MaxTimersPerSender = c.Int("sequencer.max-timers-per-sender")
	cfg.MinTimerPeriod = c.Duration("sequencer.min-timer-period")
	cfg.MaxTimerFiresPerSecond = c.Int("sequencer.max-timer-fires-per-second")
	cfg.RetransmitBytesPerSecond = int64(c.Int("sequencer.retransmit-bytes-per-second"))
	cfg.MulticastRepairWindow = c.Duration("sequencer.multicast-repair-window")
	cfg.FlowWindowPercent = c.Int("sequencer.flow-window-percent")
	cfg.FlowReceiverTimeout = c.Duration("sequencer.flow-receiver-timeout")
	cfg.MaxReceivers = c.Int("sequencer.max-receivers")
	cfg.ActiveTimeout = c.Duration("sequencer.active-timeout")
	if auto, err := autoPacketBytes(c); err == nil && cfg.MaxPacketBytes > auto {
		log.Warn("sequencer.max-packet-bytes is above the path MTU: datagrams will be IP-fragmented, and one lost fragment loses the datagram", "value", cfg.MaxPacketBytes, "path_mtu_payload", auto)
	}
	if err := cfg.Validate(); err != nil {
		return options.Keyed(err, sequencerKeys)
	}
	if err := validateTransport(c, true); err != nil {
		return err
	}
	if !c.Bool("cluster") {
		if err := clusterOnly(c); err != nil {
			return err
		}
	}
	if c.Bool("dry-run") && c.Bool("cluster") {
		cc, err := clusterConfig(c, cfg, log)
		if err != nil {
			return err
		}
		fmt.Printf("sequencer: config cluster id=%d dir=%s raft=%s admin=%s fetch=%s members=%d timeouts=%s heartbeat=%v election=%v leader_lease=%v join=%v transport=%s udp.stream-group=%s udp.command-group=%s\n",
			cc.ID, cc.Dir, cc.RaftAddr, cc.AdminAddr, peerAddr(c, cc), // fetch= is the peer address (its old name, kept for scripts)
			len(cc.Members), c.String("timeouts"), cc.Timeouts.Heartbeat, cc.Timeouts.Election, cc.Timeouts.LeaderLease, cc.Join,
			c.String("transport"), c.String("udp.stream-group"), c.String("udp.command-group"))
		return nil
	}
	if c.Bool("dry-run") {
		fmt.Printf("sequencer: config transport=%s session=%d max_packet_bytes=%d heartbeat_interval=%v ring_bytes=%d nak_answer_bytes=%d max_message_bytes=%d udp.stream-group=%s udp.command-group=%s udp.interface=%s tcp.addr=%s\n",
			c.String("transport"), cfg.Session, cfg.MaxPacketBytes, cfg.HeartbeatInterval, cfg.RingBytes, cfg.NakAnswerBytes, cfg.MaxMessageBytes,
			c.String("udp.stream-group"), c.String("udp.command-group"), c.String("udp.interface"), c.String("tcp.addr"))
		return nil
	}
	if ctx.Err() != nil {
		return stoppedInStartup(log)
	}
	if c.Bool("cluster") {
		// The group decides the session, the epoch and who sequences.
		return runClusterSequencer(c, cfg, log)
	}
	faults, err := options.FaultsFromEnv(log, "sequencer")
	if err != nil {
		return err
	}
	sc := solo.Config{
		Sequencer: cfg, Transport: transportConfig(c, faults, log),
		ListenBeforeStart: c.Duration("sequencer.listen-before-start"), Force: c.Bool("force"),
		IdleSpin: c.Duration("sequencer.idle-spin"), Logger: log,
	}
	sc.OnStart = func(a *sequencer.Agent, srv transport.Server) error {
		s := ops.SequencerSurface(adminAuth(c, log), cfg.Session, func() ops.SequencerSnap {
			return ops.SequencerSnap{Stats: a.Stats(), LastSeq: a.LastSeq()}
		}, srv)
		sv, err := serveAdmin(c, s, log)
		if sv != nil {
			go func() { <-ctx.Done(); sv.Close() }()
		}
		return err
	}
	if p := c.String("publish-times"); p != "" {
		var traced *bench.TracedServer
		sc.Wrap = func(srv transport.Server) transport.Server {
			traced = bench.NewTracedServer(srv)
			return traced
		}
		sc.AfterStop = func() error {
			if err := traced.Write(p); err != nil {
				return fmt.Errorf("--publish-times: %w", err)
			}
			return nil
		}
	}
	return solo.Run(ctx, sc)
}

// Configuration keys of the fields the package validators name.
var (
	sequencerKeys = map[string]string{
		"Session":                  "session",
		"MaxPacketBytes":           "sequencer.max-packet-bytes",
		"HeartbeatInterval":        "sequencer.heartbeat-interval",
		"MaxHeartbeatInterval":     "sequencer.max-heartbeat-interval",
		"RingBytes":                "sequencer.ring-bytes",
		"NakAnswerBytes":           "sequencer.nak-answer-bytes",
		"MaxMessageBytes":          "sequencer.max-message-bytes",
		"MaxReassemblyBytes":       "sequencer.max-reassembly-bytes",
		"ReassemblyTimeout":        "sequencer.reassembly-timeout",
		"MaxSenders":               "sequencer.max-senders",
		"SenderIdleTimeout":        "sequencer.sender-idle-timeout",
		"MaxTimersPerSender":       "sequencer.max-timers-per-sender",
		"MinTimerPeriod":           "sequencer.min-timer-period",
		"MaxTimerFiresPerSecond":   "sequencer.max-timer-fires-per-second",
		"RetransmitBytesPerSecond": "sequencer.retransmit-bytes-per-second",
		"MulticastRepairWindow":    "sequencer.multicast-repair-window",
		"FlowWindowPercent":        "sequencer.flow-window-percent",
		"FlowReceiverTimeout":      "sequencer.flow-receiver-timeout",
		"MaxReceivers":             "sequencer.max-receivers",
		"ActiveTimeout":            "sequencer.active-timeout",
	}
	nodeKeys = map[string]string{
		"Account":           "account",
		"Instance":          "instance",
		"Window":            "node.window",
		"WindowBytes":       "node.window-bytes",
		"ResendInterval":    "node.resend-interval",
		"MinResendInterval": "node.min-resend-interval",
		"MaxResendInterval": "node.max-resend-interval",
		"MaxPacketBytes":    "node.max-packet-bytes",
	}
)
