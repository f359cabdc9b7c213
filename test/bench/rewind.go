package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/test/proc"
)

// benchRewind runs `seqd bench --mode rewind`: with the sequencer up, a
// replayer process follows the stream into a store while one node
// publishes --count messages of --size bytes; then a read-only node
// joins, rewinds the whole stream from the replayer over TCP on loopback
// (its live stream idle: heartbeats only) and verifies it. Its delivery
// rate, from its first message to its last, is the figure.
func benchRewind(ctx context.Context, o Config, set *children, netArgs []string, nodeArgs func(...string) []string) error {
	dir, err := os.MkdirTemp("", "seqd-bench-rewind-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nakAddr, err := freeport.Addr()
	if err != nil {
		return err
	}
	rewindAddr, err := freeport.Addr()
	if err != nil {
		return err
	}
	var procs []*proc.Proc
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	repArgs := append([]string{"replayer"}, netArgs...)
	repArgs = append(repArgs, "--dir", dir, "--nak-addr", nakAddr, "--rewind-addr", rewindAddr, "--store.fsync", "interval")
	rep, err := set.start(ctx, "replayer", true, repArgs...)
	if err != nil {
		return err
	}
	procs = append(procs, rep)
	if _, err := rep.WaitLine("replayer: ready", 10*time.Second); err != nil {
		return err
	}
	// Load: one node publishes every message, batched (the load is not
	// what is measured).
	loadArgs := append([]string{"node"}, netArgs...)
	loadArgs = append(loadArgs, "--account", "LOAD", "--count", strconv.Itoa(o.Count), "--size", strconv.Itoa(o.SizeBytes), "--node.window", "8192")
	loader, err := set.start(ctx, "loader", false, loadArgs...)
	if err != nil {
		return err
	}
	procs = append(procs, loader)
	if _, err := loader.WaitLine("node: ok", 10*time.Minute); err != nil {
		return err
	}
	// The rewinding node: reads from seq 1, counts the loader's messages.
	rw, err := set.start(ctx, "rewinder", false, nodeArgs("--read-only", "--count", "0", "--expect", strconv.Itoa(o.Count), "--rewind", rewindAddr)...)
	if err != nil {
		return err
	}
	procs = append(procs, rw)
	line, err := rw.WaitLine("node: ok", 10*time.Minute)
	if err != nil {
		return err
	}
	rate, err := field(line, "rate")
	if err != nil {
		return err
	}
	allocs, _ := field(line, "allocs_per_msg")
	fmt.Fprintf(o.Out, "bench transport=%s mode=rewind size=%d msgs=%d rate=%.0f msg/s allocs_per_msg=%.4f\n", o.Transport, o.SizeBytes, o.Count, rate, allocs)
	return nil
}
