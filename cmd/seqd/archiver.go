package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/archiver"
	"github.com/seqd/seqd/ops/options"
)

func archiverCommand() *cli.Command {
	def := archiver.DefaultConfig()
	flags, before := options.WithConfig([]cli.Flag{
		options.String("from", "", "a session directory (a replayer's --dir) or a directory of them, one per session"),
		options.String("to", "", "destination directory (or file:///path; mount an object store to ship to it): each session goes to TO/SESSION with MANIFEST.json and SHA256SUMS"),
		options.Duration("settle", def.Settle, "a session is finished once its segment files have not changed for this long"),
		options.Duration("interval", def.Interval, "how often to look for finished sessions"),
		options.Bool("reverify", false, "read every shipped session and its copy again at each scan (a damaged copy is shipped again); without it a session whose files did not change since it was shipped is skipped"),
		options.Bool("once", false, "ship what is finished now and exit (status 1 if any session failed) instead of watching"),
		options.Bool("verbose", false, "debug logging"),
	})
	return &cli.Command{
		Name:  "archiver",
		Usage: "ship each finished session's archive to a directory and verify the copy",
		Description: `Watches --from for finished sessions (segment files unchanged for
--settle, opening as a clean archive) and copies each to --to/SESSION:
every file through a temporary name, fsynced and renamed, then read back
and compared by SHA-256 and size, the copy opened as an archive of the
same session and range, and SHA256SUMS and MANIFEST.json written last.
Re-runs are idempotent: a shipped session is left alone (not read again
unless its files changed, or --reverify: then a damaged copy is shipped
again).

Example:
  seqd archiver --from /var/lib/seqd/replayer --to /mnt/archive --settle 10m
  seqd archiver --from /var/lib/seqd/replayer/2026-12-01 --to /mnt/archive --settle 0 --once

Exit status: 0 when SIGTERM or SIGINT stopped it (or --once shipped
everything finished); 1 on a bad configuration or, with --once, any
session that failed.`,
		Flags:  flags,
		Before: before,
		Action: runArchiver,
	}
}

func runArchiver(cc *cli.Context) error {
	log := options.NewLogger(cc)
	cfg := archiver.DefaultConfig()
	cfg.Source, cfg.Dest = cc.String("from"), cc.String("to")
	cfg.Settle, cfg.Interval, cfg.Reverify = cc.Duration("settle"), cc.Duration("interval"), cc.Bool("reverify")
	keys := map[string]string{"Source": "from", "Dest": "to", "Settle": "settle", "Interval": "interval"}
	if err := cfg.Validate(); err != nil {
		return options.Keyed(err, keys)
	}
	report := func(r archiver.Report) {
		switch {
		case r.Err != nil:
			log.Error("archiver: session not shipped", "dir", r.Dir, "err", r.Err)
		case r.Pending:
			log.Debug("archiver: session not finished yet", "dir", r.Dir)
		case r.Result.UpToDate:
			log.Debug("archiver: session already shipped", "dir", r.Dir, "to", r.Result.Dir)
		default:
			fmt.Printf("archiver: shipped session=%x files=%d copied=%d bytes=%d last_seq=%d from=%s to=%s verified=sha256\n",
				r.Result.Session, r.Result.Files, r.Result.Copied, r.Result.Bytes, r.Result.LastSeq, r.Dir, r.Result.Dir)
		}
	}
	if cc.Bool("once") {
		reps, err := archiver.Scan(cfg, time.Now())
		if err != nil {
			return err
		}
		for _, r := range reps {
			report(r)
		}
		return archiver.Failed(reps)
	}
	return archiver.Run(cc.Context, cfg, report)
}
