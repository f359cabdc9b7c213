package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/bench"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func nodeCommand() *cli.Command {
	d := node.DefaultConfig()
	flags, before := options.WithConfig(append(append(transportFlags(false),
		options.String("account", "", "this node's account (1..8 ASCII bytes); empty with --read-only"),
		options.Int("instance", 1, "instance id (hot-hot pairs share an account)"),
		options.Int("count", 1000, "commands to send; the node exits 0 once all are acknowledged"),
		options.Int("size", 256, "payload bytes per command"),
		options.Int("rate", 0, "commands per second (0: as fast as the window allows)"),
		options.Int("expect", 0, "also wait until this many messages of other accounts were delivered (at least 1 with --read-only or --count 0)"),
		options.Bool("read-only", false, "send nothing; only read and verify the stream"),
		options.String("node.mode", "safe", "safe (deliver what the group holds as stable) | fast (deliver on arrival)"),
		options.Int("node.window", d.Window, "commands in flight before Send blocks"),
		options.Int("node.window-bytes", d.WindowBytes, "payload bytes in flight before Send blocks (one command always goes)"),
		options.Duration("node.resend-interval", d.ResendInterval, "first resend timeout of a command not seen in the stream, until the round trip is measured"),
		options.Duration("node.min-resend-interval", d.MinResendInterval, "lower bound of the measured resend timeout (srtt + 4*rttvar)"),
		options.Duration("node.max-resend-interval", d.MaxResendInterval, "upper bound of the resend timeout, backoff included"),
		options.Int("node.max-packet-bytes", 0, "largest command frame; 0: the path MTU (smaller: less batching)"),
		options.Duration("node.idle-spin", 0, "keep polling without blocking this long after each frame (lower latency, costs a core)"),
		options.Bool("rtt", false, "round-trip mode: send a command, wait to see it, repeat; report percentiles"),
		options.String("samples", "", "rtt mode: write the round trips (ns, one per line) to this file"),
		options.String("stamps", "", "rtt mode: note when each round trip passed each hop and write it to this file (seq sent out stamp in delivered, wall ns; for seqd bench's latency breakdown)"),
		options.Duration("timeout", 10*time.Minute, "give up after this long"),
		replayerFlag(),
		rewindFlag(),
		streamWarnFlag(),
	), append(adminServeFlags(true), gossipFlags(false)...)...))
	return &cli.Command{
		Name:  "node",
		Usage: "run a built-in node: send commands, verify the whole stream, exit 0 once all commands are acknowledged",
		Description: `Reads the stream from seq 1 and verifies it: dense seqs, and each sender's
commands once and in order, numbered from 1 in each incarnation (a first
command other than 1 means command 1 was lost); its own payloads intact.

Exit status: 0 once every command is acknowledged (and --expect reached),
printing "node: ok ..."; 2 when SIGTERM or SIGINT stopped it before that,
printing "node: stopped ..."; 1 on any error (configuration, verification,
--timeout).`,
		Flags:  flags,
		Before: before,
		Action: runNode,
	}
}

func runNode(cc *cli.Context) error {
	log := options.NewLogger(cc)
	cfg := node.DefaultConfig()
	cfg.RewindTLS = rewindTLS(cc)
	// The built-in node verifies and counts (--expect) the stream from
	// seq 1, as it always did; library nodes start live by default.
	cfg.Rewind = true
	cfg.Account = cc.String("account")
	cfg.Instance = uint8(cc.Int("instance"))
	cfg.ReadOnly = cc.Bool("read-only")
	cfg.Window = cc.Int("node.window")
	cfg.WindowBytes = cc.Int("node.window-bytes")
	cfg.ResendInterval = cc.Duration("node.resend-interval")
	cfg.MinResendInterval = cc.Duration("node.min-resend-interval")
	cfg.MaxResendInterval = cc.Duration("node.max-resend-interval")
	var err error
	if cfg.MaxPacketBytes, err = packetBytes(cc, "node.max-packet-bytes"); err != nil {
		return err
	}
	cfg.BlockWhenFull = true
	cfg.Replayers = cc.StringSlice("replayer")
	mode := cc.String("node.mode")
	if err := options.OneOf("node.mode", mode, "safe", "fast"); err != nil {
		return err
	}
	if mode == "fast" {
		cfg.Mode = node.Fast
	}
	count, size := cc.Int("count"), cc.Int("size")
	for _, k := range []string{"count", "rate", "expect"} {
		if v := cc.Int(k); v < 0 {
			return options.KeyError(k, fmt.Sprint(v), ">= 0")
		}
	}
	if cfg.ReadOnly {
		count = 0
	}
	if count == 0 && cc.Int("expect") <= 0 {
		// It would be done at once: exit 0 with nothing read, even with
		// no sequencer running.
		what := "--count 0"
		if cfg.ReadOnly {
			what = "--read-only"
		}
		return options.KeyError("expect", fmt.Sprint(cc.Int("expect")), ">= 1 with "+what+" (the messages to read and verify before exiting 0; seqd tail follows the stream until stopped)")
	}
	if cc.Int("instance") < 0 || cc.Int("instance") > 255 {
		return options.KeyError("instance", fmt.Sprint(cc.Int("instance")), "0..255")
	}
	if size < 0 || size > cfg.MaxMessageBytes {
		return options.KeyError("size", fmt.Sprint(size), fmt.Sprintf("0..%d", cfg.MaxMessageBytes))
	}
	if err := cfg.Validate(); err != nil {
		return options.Keyed(err, nodeKeys)
	}
	client, err := openClient(cc, log, "node")
	if err != nil {
		return err
	}
	defer client.Close()
	if cfg.Account != "" {
		if _, err := wire.ParseAccount(cfg.Account); err != nil {
			return options.KeyError("account", fmt.Sprintf("%q", cfg.Account), "1..8 printable ASCII bytes")
		}
	}
	// --gossip: a replayer that holds seq 1 found by gossip serves the
	// rewind (and NAKs) when none is named, and replaces one that dies.
	agent, gossipNak, gossipRewind, err := tailGossip(cc, log, max(cfg.RewindFrom, 1))
	if err != nil {
		return err
	}
	if agent != nil {
		defer agent.Close()
	}
	if gossipNak != "" && !slices.Contains(cfg.Replayers, gossipNak) {
		cfg.Replayers = append(cfg.Replayers, gossipNak)
	}
	rewinds := rewindAddrs(cc.String("rewind"))
	if len(rewinds) == 0 && gossipRewind != "" {
		rewinds = []string{gossipRewind}
	}
	ln, err := bench.NewLoadNode(bench.NodeConfig{
		Node: cfg, Count: count, Expect: cc.Int("expect"), SizeBytes: size, Rate: cc.Int("rate"),
		RTT: cc.Bool("rtt"), SamplesPath: cc.String("samples"), StampsPath: cc.String("stamps"),
		IdleSpin: cc.Duration("node.idle-spin"), Logger: log,
		// Nothing to rewind from but the sequencer's ring: check that it
		// still holds seq 1 before sending.
		WaitForHistory: len(cfg.Replayers) == 0 && len(rewinds) == 0,
	}, client)
	if err != nil {
		return options.Keyed(err, nodeKeys)
	}
	tiered.SetRewind(ln.Node(), log, rewinds, agent, cfg.Session)
	asv, err := serveAdmin(cc, ops.NodeSurface(adminAuth(cc, log), ops.KindNode, bench.OrDash(cfg.Account), ln.Node(), client), log)
	if err != nil {
		return err
	}
	if asv != nil {
		defer asv.Close()
	}
	// cc.Context is done on SIGTERM or SIGINT, even one sent during
	// start-up: the node then stops with exitInterrupted.
	ctx, cancel := context.WithTimeout(cc.Context, cc.Duration("timeout"))
	defer cancel()
	go transport.WarnSilence(ctx, log, client, listenAddress(cc), cc.Duration("stream-warn-after"))
	fields, err := ln.Run(ctx)
	var early *bench.StoppedError
	if errors.As(err, &early) && stopsignal.Received() != nil {
		return interrupted(cfg.Account, ln.Progress())
	}
	if errors.Is(err, node.ErrUnrecoverable) && len(cfg.Replayers) == 0 && len(rewinds) == 0 {
		return fmt.Errorf("%w; seqd node reads the stream from seq 1, and the sequencer's retransmit ring no longer holds it: name a replayer that does (--replayer NAK_ADDR and --rewind REWIND_ADDR, its --nak-addr and --rewind-addr, or --gossip to find one); acked %d of %d", err, ln.Progress().Acked, count)
	}
	if err != nil {
		return err
	}
	fmt.Println("node: ok " + fields)
	return nil
}

// interrupted ends a node stopped by SIGTERM or SIGINT before it was done
// (during start-up included): a stopped line on stdout, exitInterrupted.
func interrupted(account string, p bench.Progress) error {
	fmt.Printf("node: stopped account=%s count=%d acked=%d others=%d last_seq=%d signal=%s\n",
		bench.OrDash(account), p.Count, p.Acked, p.Others, p.LastSeq, stopsignal.Received())
	return &codedError{code: exitInterrupted, err: fmt.Errorf("stopped by %v before done: acked %d of %d, others %d of %d", stopsignal.Received(), p.Acked, p.Count, p.Others, p.Expect)}
}
