package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
)

// streamWarnFlag is the node's and the tail's key for the silence warning.
// rewindFlag names the replayer a node or tail rewinds from over TCP.
func rewindFlag() cli.Flag {
	return options.String("rewind", "", "rewind history (from seq 1, or --from) from the replayer whose rewind server listens at this TCP host:port (its --rewind-addr), then merge onto the live stream; several comma-separated: a rewind whose replayer fails resumes from the next (with --gossip: from a replayer gossip selects); empty: repair history by NAK")
}

// setRewind makes n rewind from addrs[0] and, when a replayer dies
// mid-rewind, resume from one gossip selects (agent non-nil: the highest
// tier holding the resume seq, not the one that failed) or else the next
// of addrs.
func setRewind(n *node.Node, log *slog.Logger, addrs []string, agent *tiered.Agent, session uint64) {
	if len(addrs) == 0 {
		return
	}
	n.SetRewindAddr(addrs...)
	if agent == nil {
		return
	}
	gossip := agent.RewindSource(tiered.Query{Session: session, HighTierFirst: true})
	n.SetRewindSource(func(from uint64, failed string) string {
		a := gossip(from, failed)
		log.Warn("rewind: the replayer failed before the rewind caught up; resuming from another", "failed", failed, "from", from, "gossip", a)
		return a
	})
}

// rewindAddrs splits --rewind.
func rewindAddrs(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func streamWarnFlag() cli.Flag {
	return options.Duration("stream-warn-after", 3*time.Second, "warn (log WARN) when nothing came from a sequencer for this long, and again at a tenth of that rate while it lasts (0: never)")
}

// listenAddress says where a client waits for the stream, for the
// silence warning: the group and interface, or the TCP address.
func listenAddress(c *cli.Context) string {
	if c.String("transport") == "tcp" {
		return "tcp " + c.String("tcp.addr")
	}
	return fmt.Sprintf("udp group %s on interface %s", c.String("udp.stream-group"), c.String("udp.interface"))
}

// watchStream logs a warning when the client received nothing for after
// (a sequencer heartbeats every few ms, so silence means there is none,
// or it is on another group), then every 10*after while the silence
// lasts, until ctx ends. Without it a node pointed at the wrong group
// waits in silence until its timeout.
func watchStream(ctx context.Context, log *slog.Logger, client transport.Client, where string, after time.Duration) {
	st, ok := client.(transport.Stats)
	if !ok || after <= 0 {
		return
	}
	tick := time.NewTicker(min(after/4, time.Second))
	defer tick.Stop()
	last := st.Counters().FramesReceived
	quiet := time.Now()
	due := after
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if n := st.Counters().FramesReceived; n != last {
				last, quiet, due = n, now, after
				continue
			}
			if d := now.Sub(quiet); d >= due {
				what := "no stream from a sequencer yet: is one running on this group?"
				if last > 0 {
					what = "the stream stopped: is the sequencer still running?"
				}
				log.Warn(what, "silent_for", d.Round(time.Millisecond).String(), "listening", where)
				due = d + 10*after
			}
		}
	}
}
