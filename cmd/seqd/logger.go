package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/logger"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
)

func loggerCommand() *cli.Command {
	def := logger.DefaultConfig()
	flags, before := options.WithConfig(append(append(transportFlags(false),
		options.String("dir", "", "directory of the log files (PREFIX-YYYY-MM-DD.NNN.log, or .jsonl with --format json); created if missing"),
		options.String("prefix", def.Prefix, "first part of each file's name"),
		options.String("format", string(def.Format), "text (one line per message: time seq epoch sender cmd size and the payload quoted) | json (JSON Lines: seqd tail's keys and payload, or payload_hex when it is not UTF-8)"),
		options.Int("max-file-bytes", int(def.MaxFileBytes), "rotate to the next file of the day before one passes this size (0: no size limit; else >= 4096)"),
		options.Bool("daily", def.Daily, "start a new file when the day (UTC) of the sequencer's time changes"),
		options.Int("keep", def.Keep, "keep this many files, removing the oldest at each rotation (0: every file)"),
		options.Int("max-payload-bytes", def.MaxPayloadBytes, "show at most this many payload bytes per message (0: none; the size is always shown)"),
		options.Bool("internal", def.Internal, "also log internal (sequencer-generated) messages"),
		options.String("from", "live", "live: start at the live tail of the stream; N (>= 1): rewind from seq N (the sequencer's retransmit ring, a --replayer or --rewind must hold it)"),
		replayerFlag(),
		rewindFlag(),
		streamWarnFlag(),
	), gossipFlags(false)...))
	return &cli.Command{
		Name:  "logger",
		Usage: "write the event stream to rotated, human-readable log files (a read-only node)",
		Description: `Follows the stream as seqd tail does and writes each message as one line
to files in --dir, rotated by day (of the sequencer's time, so a replay
cuts its files where the live run did) and by size.

Example:
  seqd logger --dir /var/log/seqd --from 1 --rewind 127.0.0.1:9400 --max-file-bytes 104857600 --keep 30

Exit status: 0 when SIGTERM or SIGINT stopped it (every buffered line
written); 1 on any error (a file that cannot be written stops it).`,
		Flags:  flags,
		Before: before,
		Action: runLogger,
	}
}

func runLogger(cc *cli.Context) error {
	log := options.NewLogger(cc)
	lc := logger.DefaultConfig()
	lc.Dir, lc.Prefix, lc.Format = cc.String("dir"), cc.String("prefix"), logger.Format(cc.String("format"))
	lc.MaxFileBytes, lc.Daily, lc.Keep = int64(cc.Int("max-file-bytes")), cc.Bool("daily"), cc.Int("keep")
	lc.MaxPayloadBytes, lc.Internal = cc.Int("max-payload-bytes"), cc.Bool("internal")
	lg, err := logger.New(lc)
	if err != nil {
		return options.Keyed(err, map[string]string{"Dir": "dir", "Prefix": "prefix", "Format": "format",
			"MaxFileBytes": "max-file-bytes", "Keep": "keep", "MaxPayloadBytes": "max-payload-bytes"})
	}
	cfg := node.DefaultConfig()
	cfg.RewindTLS = rewindTLS(cc)
	cfg.ReadOnly = true
	from, err := parseFrom(cc.String("from"))
	if err != nil {
		return err
	}
	cfg.Rewind, cfg.RewindFrom = from > 0, from
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
	client, err := openClient(cc, log, "logger")
	if err != nil {
		return err
	}
	defer client.Close()
	n, err := node.New(cfg, lg, client)
	if err != nil {
		return options.Keyed(err, nodeKeys)
	}
	if rewindAddr != "" {
		if from == 0 {
			return options.KeyError("rewind", fmt.Sprintf("%q", rewindAddr), "empty without --from N (a logger from the live tail has no history to rewind)")
		}
		tiered.SetRewind(n, log, rewindAddrs(rewindAddr), agent, cfg.Session)
	}
	ctx, cancel := context.WithCancel(cc.Context)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	go transport.WarnSilence(ctx, log, client, listenAddress(cc), cc.Duration("stream-warn-after"))
	lg.Attach(n)
	log.Info("logger started", "dir", lc.Dir, "format", lc.Format, "from", cc.String("from"), "pid", os.Getpid())
	start := time.Now()
	var runErr error
	select {
	case <-lg.Failed():
		cancel()
		<-errc
	case runErr = <-errc:
		if errors.Is(runErr, context.Canceled) {
			runErr = nil
		}
	}
	// The node stopped: the Logger's files are the shell's now.
	if err := lg.Close(); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	fmt.Printf("logger: stopped lines=%d dir=%s elapsed=%s\n", lg.Lines(), lc.Dir, time.Since(start).Round(time.Millisecond))
	return nil
}
