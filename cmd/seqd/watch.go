package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/options"
)

// streamWarnFlag is the node's and the tail's key for the silence warning.
// rewindFlag names the replayer a node or tail rewinds from over TCP.
func rewindFlag() cli.Flag {
	return options.String("rewind", "", "rewind history (from seq 1, or --from) from the replayer whose rewind server listens at this TCP host:port (its --rewind-addr), then merge onto the live stream; several comma-separated: a rewind whose replayer fails resumes from the next (with --gossip: from a replayer gossip selects); empty: repair history by NAK")
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
