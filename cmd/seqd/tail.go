package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/ops/tail"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
)

func tailCommand() *cli.Command {
	flags, before := options.WithConfig(append(append(transportFlags(false),
		options.String("format", "text", "text | json (one object per message per line: seq epoch time account instance cmd_seq size crc internal, and type for an internal message)"),
		options.String("from", "live", "live: start at the live tail of the stream; N (>= 1): rewind from seq N, which the sequencer's retransmit ring or a --replayer must still hold"),
		options.Int("count", 0, "stop after this many messages (0: until interrupted)"),
		options.Bool("internal", true, "also print internal (sequencer-generated) messages; their account and instance are those of the sender the record is about (incarnation, activation, timer), empty and 0 for session and epoch records"),
		options.String("node.mode", "safe", "safe | fast"),
		replayerFlag(),
		options.String("archive", "", "read this session archive directory (a replayer's segment files) instead of the live stream: prints from --from (live: the archive's first seq) to its end, or --count messages"),
		options.Bool("follow", false, "with --archive: at the archive's end, keep printing what its replayer goes on writing (as tail -f does), until --count or a signal"),
		options.Duration("follow-poll", 100*time.Millisecond, "with --follow: how often to look for new records at the archive's end"),
		rewindFlag(),
		streamWarnFlag(),
	), append(adminServeFlags(true), gossipFlags(false)...)...))
	return &cli.Command{
		Name:  "tail",
		Usage: "print the event stream (read-only node)",
		Description: `Prints each message of the stream, from the live tail on (--from live) or
from an earlier seq still held by the sequencer's retransmit ring (--from N).

--format json writes one object per line with the keys
  seq epoch time account instance cmd_seq size crc internal
where time is the sequencer's clock in ns, size and crc (CRC-32C) describe
the payload, and internal is true for a record the sequencer generated.
An internal record also has "type" (session-start, epoch-start,
incarnation, node-activated, node-deactivated, force-passive, timer,
timer-set, timer-cancel); its account and instance name the sender the
record is about (whose incarnation, activation or timer it is), and are
"" and 0 for session-start and epoch-start.

Exit status: 0 when --count messages were printed or SIGTERM or SIGINT
stopped it; 1 on any error.`,
		Flags:  flags,
		Before: before,
		Action: runTail,
	}
}

func runTail(cc *cli.Context) error {
	if dir := cc.String("archive"); dir != "" {
		return runTailArchive(cc, dir)
	}
	if cc.Bool("follow") {
		return options.KeyError("follow", "true", "only with --archive DIR (a tail of the live stream always follows it)")
	}
	if v := cc.Int("count"); v < 0 {
		return options.KeyError("count", fmt.Sprint(v), ">= 0 (0: until interrupted)")
	}
	log := options.NewLogger(cc)
	format := cc.String("format")
	if err := options.OneOf("format", format, "text", "json"); err != nil {
		return err
	}
	mode := cc.String("node.mode")
	if err := options.OneOf("node.mode", mode, "safe", "fast"); err != nil {
		return err
	}
	cfg := node.DefaultConfig()
	cfg.RewindTLS = rewindTLS(cc)
	cfg.ReadOnly = true
	from, err := parseFrom(cc.String("from"))
	if err != nil {
		return err
	}
	cfg.Rewind = from > 0
	cfg.RewindFrom = from
	cfg.Replayers = cc.StringSlice("replayer")
	agent, gossipNak, gossipRewind, err := tailGossip(cc, log, from)
	if err != nil {
		return err
	}
	if agent != nil {
		defer agent.Close()
	}
	if gossipNak != "" && !slices.Contains(cfg.Replayers, gossipNak) {
		cfg.Replayers = append(cfg.Replayers, gossipNak)
	}
	rewindAddr := cc.String("rewind")
	if rewindAddr == "" && from > 0 {
		rewindAddr = gossipRewind
	}
	if mode == "fast" {
		cfg.Mode = node.Fast
	}
	client, err := openClient(cc, log, "tail")
	if err != nil {
		return err
	}
	defer client.Close()
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	t := tail.NewTailer(out, format == "json", cc.Bool("internal"), cc.Int("count"))
	n, err := node.New(cfg, t, client)
	if err != nil {
		return options.Keyed(err, nodeKeys)
	}
	if a := rewindAddr; a != "" {
		if from == 0 {
			return options.KeyError("rewind", fmt.Sprintf("%q", a), "empty without --from N (a tail from the live tail has no history to rewind)")
		}
		tiered.SetRewind(n, log, rewindAddrs(a), agent, cfg.Session)
	}
	asv, err := serveAdmin(cc, ops.NodeSurface(adminAuth(cc, log), ops.KindTail, "tail", n, client), log)
	if err != nil {
		return err
	}
	if asv != nil {
		defer asv.Close()
	}
	// Done on SIGTERM or SIGINT, even one sent during start-up: the tail
	// then ends with status 0 like one stopped while printing.
	ctx, cancel := context.WithCancel(cc.Context)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	go transport.WarnSilence(ctx, log, client, listenAddress(cc), cc.Duration("stream-warn-after"))
	t.Attach(n)
	for {
		select {
		case <-t.Done():
			cancel()
			<-errc
			return nil
		case err := <-errc:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if errors.Is(err, node.ErrRewind) {
				return fmt.Errorf("--from %d --rewind %s: %w", from, rewindAddr, err)
			}
			if from > 0 && errors.Is(err, node.ErrUnrecoverable) {
				if len(cfg.Replayers) > 0 {
					return fmt.Errorf("--from %d: neither the sequencer's retransmit ring nor the replayers %v hold the seqs asked for (%w)", from, cfg.Replayers, err)
				}
				return fmt.Errorf("--from %d: the sequencer's retransmit ring no longer holds the seqs asked for (%w); start later, use --from live, or name a --replayer", from, err)
			}
			return err
		}
	}
}

// parseFrom reads --from: "live" is 0, else a seq >= 1.
func parseFrom(v string) (uint64, error) {
	if v == "live" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, options.KeyError("from", fmt.Sprintf("%q", v), "live, or a seq >= 1")
	}
	return n, nil
}
