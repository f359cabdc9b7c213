package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/test/proc"
	"github.com/seqd/seqd/wire"
)

// children is one run's seqd processes, started from exe under one death
// watch (test/proc): the first that dies unasked ends whatever the bench
// waits for, with its exit status and last stderr lines.
type children struct {
	*proc.Set
	exe string
}

func newChildren(exe string) *children { return &children{Set: proc.NewSet("bench"), exe: exe} }

// start starts `seqd args...` under name, its stderr copied to ours with
// the name before each line. mustRun: it ends only when stopped (the
// sequencer), so any exit is a failure.
func (c *children) start(ctx context.Context, name string, mustRun bool, args ...string) (*proc.Proc, error) {
	return c.Start(ctx, proc.Spec{Name: name, Path: c.exe, Args: args, MustRun: mustRun, Stderr: os.Stderr, Prefix: name + ": "})
}

// field reads key=value out of a result line.
func field(line, key string) (float64, error) {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("bench: no %s= in %q", key, line)
}

// benchNet picks addresses no other run on this host uses: random
// multicast groups and ports, a free TCP port.
func benchNet(transportName string) ([]string, error) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	port := freeport.GroupPortsOr(2, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	tcpAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	return []string{
		"--transport", transportName,
		"--udp.stream-group", fmt.Sprintf("239.77.%d.%d:%d", a, b, port),
		"--udp.command-group", fmt.Sprintf("239.78.%d.%d:%d", a, b, port+1),
		"--tcp.addr", tcpAddr,
	}, nil
}

// benchProcesses runs `seqd bench --transport udp|tcp`: the sequencer and
// every node are separate processes on loopback. With --sequencers 3 it
// runs twice, with one sequencer and then with a Raft group of three, and
// gives the second figure as a ratio of the first (benchcluster.go).
func benchProcesses(ctx context.Context, o Config, outDir string) error {
	if o.Sequencers == 3 && o.Mode != "idle" {
		return benchCompareCluster(ctx, o, outDir)
	}
	if o.TLS == "compare" {
		return benchCompareTLS(ctx, o, outDir)
	}
	line, err := benchRun(ctx, o, outDir)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, line)
	return nil
}

// benchRun runs one bench and returns its result line: with
// o.Sequencers == 3 against three `seqd sequencer --cluster` members.
// A tput or rtt line ends with the CPU time (user + system, from each
// child's rusage once it exited) of every process of the run, nodes
// included: cpu_s in all, cpu_s_per_million messages, and its split into
// the sequencers (with a group: the first primary and the standbys) and
// the nodes. The whole run is counted (start-up, the election, the
// shutdown), the same way for one sequencer and for a group.
func benchRun(ctx context.Context, o Config, outDir string) (string, error) {
	set := newChildren(o.Exe)
	var primary *proc.Proc
	line, err := benchRunIn(ctx, o, outDir, set, &primary)
	set.StopAll()
	if err != nil || (o.Mode != "tput" && o.Mode != "rtt") {
		return line, err
	}
	msgs, err := field(line, "msgs")
	if err != nil || msgs <= 0 {
		return line, err
	}
	var all, seqs, prim, nodes time.Duration
	for _, p := range set.Started() {
		c := p.CPU()
		all += c
		switch {
		case p == primary:
			prim += c
			seqs += c
		case strings.HasPrefix(p.Name(), "sequencer"):
			seqs += c
		default:
			nodes += c
		}
	}
	line += fmt.Sprintf(" cpu_s=%.2f cpu_s_per_million=%.3f cpu_seq_s=%.2f cpu_nodes_s=%.2f", all.Seconds(), all.Seconds()*1e6/msgs, seqs.Seconds(), nodes.Seconds())
	if primary != nil {
		line += fmt.Sprintf(" cpu_primary_s=%.2f cpu_standbys_s=%.2f", prim.Seconds(), (seqs - prim).Seconds())
	}
	return line, nil
}

// benchRunIn is benchRun on the children of set; with a group, the first
// primary goes to *primary.
func benchRunIn(ctx context.Context, o Config, outDir string, set *children, primary **proc.Proc) (line string, err error) {
	netArgs, err := benchNet(o.Transport)
	if err != nil {
		return "", err
	}
	if o.Auth {
		dir, err := os.MkdirTemp("", "seqd-bench-keys-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		keyArgs, err := benchKeys(dir)
		if err != nil {
			return "", err
		}
		netArgs = append(netArgs, keyArgs...)
	}
	if o.TLS == "on" {
		dir, err := os.MkdirTemp("", "seqd-bench-tls-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		tlsArgs, err := benchTLSArgs(dir)
		if err != nil {
			return "", err
		}
		netArgs = append(netArgs, tlsArgs...)
		defer func() {
			if line != "" {
				line += " tls=on"
			}
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	seqArgs := append([]string{"sequencer"}, netArgs...)
	seqArgs = append(seqArgs, "--session", strconv.FormatInt(time.Now().UnixNano(), 10), "--sequencer.idle-spin", o.Spin.String())
	// The rtt latency breakdown: the sequencer notes when each packet
	// went out, the node when each round trip passed each hop.
	var publishTimes, stamps string
	if o.Mode == "rtt" {
		// With --out the raw instants stay there for a closer look.
		dir := outDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "seqd-bench-"); err != nil {
				return "", err
			}
			defer os.RemoveAll(dir)
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		publishTimes, stamps = filepath.Join(dir, "rtt_publish_times_ns.txt"), filepath.Join(dir, "rtt_stamps_ns.txt")
		seqArgs = append(seqArgs, "--publish-times", publishTimes)
	}
	var seq *proc.Proc
	var group *benchCluster // with o.Sequencers == 3
	stopSeq := func() { seq.Stop() }
	if o.Sequencers == 3 {
		group, err = startBenchCluster(ctx, set, netArgs, o.Spin, "--timeouts", o.Timeouts)
		if err != nil {
			return "", err
		}
		defer group.stop()
		seq, stopSeq = group.primary, group.stopPrimary
		*primary = group.primary
		if o.Mode == "tput" || o.Mode == "rtt" {
			// The figures hold for one primary only: say how many there were.
			defer func() {
				if line != "" {
					line += fmt.Sprintf(" epochs=%d", group.primaries.Load())
				}
			}()
		}
	} else {
		if seq, err = set.start(ctx, "sequencer", true, seqArgs...); err != nil {
			return "", err
		}
		defer seq.Stop()
		if _, err := seq.WaitLine("sequencer: ready", 10*time.Second); err != nil {
			return "", err
		}
	}
	nodeArgs := func(extra ...string) []string {
		a := append([]string{"node"}, netArgs...)
		a = append(a, "--size", strconv.Itoa(o.SizeBytes), "--node.window", "4096", "--node.idle-spin", o.Spin.String(), "--node.mode", o.Delivery)
		if one := wire.CommandHeaderBytes + wire.CommandRecordBytes + o.SizeBytes; !o.Batch && one <= 65507 {
			if o.Auth {
				one += wire.AuthTrailerBytes // the limit is the signed frame's
			}
			// One command per frame: the frame limit fits exactly one.
			// (A larger command is fragmented over several frames anyway.)
			// The node's smallest frame limit holds a fragment header
			// and 64 bytes more than a record header: a smaller
			// command still goes one per frame under it.
			a = append(a, "--node.max-packet-bytes", strconv.Itoa(max(one, wire.CommandHeaderBytes+wire.CommandRecordBytes+wire.FragmentHeaderBytes+64)))
		}
		return append(a, extra...)
	}
	if o.Mode == "rewind" {
		return "", benchRewind(ctx, o, set, netArgs, nodeArgs)
	}
	if o.Mode == "idle" {
		return benchIdle(ctx, o, set, seq, group, netArgs)
	}
	var procs []*proc.Proc
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	if o.Mode == "rtt" {
		samples := ""
		if outDir != "" {
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return "", err
			}
			samples = filepath.Join(outDir, "rtt_samples_ns.txt")
		}
		args := nodeArgs("--account", "RTT", "--rtt", "--count", strconv.Itoa(o.Count), "--stamps", stamps)
		if samples != "" {
			args = append(args, "--samples", samples)
		}
		p, err := set.start(ctx, "rtt-node", false, args...)
		if err != nil {
			return "", err
		}
		procs = append(procs, p)
		line, err := p.WaitLine("node: ok", 10*time.Minute)
		if err != nil {
			return "", err
		}
		spin := ""
		if o.Spin > 0 {
			spin = fmt.Sprintf(" spin_us=%d", o.Spin.Microseconds())
		}
		if o.Sequencers == 3 {
			// No per-hop breakdown: a cluster member does not note its
			// publish times.
			return fmt.Sprintf("bench transport=%s mode=rtt size=%d msgs=%d %s%s", o.Transport, o.SizeBytes, o.Count, latencyFields(line), spin), nil
		}
		hops, err := rttHops(seq, publishTimes, stamps)
		if err != nil {
			return "", err
		}
		result := fmt.Sprintf("bench transport=%s mode=rtt size=%d msgs=%d %s%s %s", o.Transport, o.SizeBytes, o.Count, latencyFields(line), spin, hops.fields())
		if outDir != "" {
			path, err := hops.writeCSV(outDir, o.Transport)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(os.Stderr, "bench: hops %s\n", path)
		}
		if samples != "" {
			if err := histogramFromFile(outDir, o.Transport, samples); err != nil {
				return "", err
			}
		}
		return result, nil
	}

	// As in the seeds' throughput table, the senders are the readers: each
	// one verifies the whole stream (dense, every sender's commands once
	// and in order, its own payloads intact) and reports the rate at which
	// it delivered it; the slowest one is the figure.
	per := o.Count / o.Nodes
	total := per * o.Nodes
	var senders []*proc.Proc
	for i := 0; i < o.Nodes; i++ {
		p, err := set.start(ctx, fmt.Sprintf("sender%d", i), false, nodeArgs("--account", fmt.Sprintf("B%d", i),
			"--count", strconv.Itoa(per), "--expect", strconv.Itoa(total-per))...)
		if err != nil {
			return "", err
		}
		procs = append(procs, p)
		senders = append(senders, p)
	}
	rate, worst, resends, dups := 0.0, 0.0, 0.0, 0.0
	for i, s := range senders {
		l, err := s.WaitLine("node: ok", 10*time.Minute)
		if err != nil {
			return "", err
		}
		if os.Getenv("SEQD_BENCH_NODES") != "" {
			// Each sender's own figures (frames, held packets, turns), to
			// see where a mode's CPU goes.
			fmt.Fprintf(os.Stderr, "sender%d: %s\n", i, l)
		}
		r, err := field(l, "rate")
		if err != nil {
			return "", err
		}
		if i == 0 || r < rate {
			rate = r
		}
		if a, err := field(l, "allocs_per_msg"); err == nil && a > worst {
			worst = a
		}
		if r, err := field(l, "resends"); err == nil {
			resends += r
		}
	}
	stopSeq()
	if l, err := seq.WaitLine("sequencer: stopped", 5*time.Second); err == nil {
		if a, err := field(l, "allocs_per_msg"); err == nil && a > worst {
			worst = a
		}
		if d, err := field(l, "duplicates"); err == nil {
			dups = d
		}
	}
	// resends: commands the nodes sent again; duplicates: copies the
	// sequencer dropped (resends that were not needed, and repeats).
	return fmt.Sprintf("bench transport=%s mode=tput size=%d nodes=%d msgs=%d rate=%.0f msg/s allocs_per_msg=%.4f resends=%.0f duplicates=%.0f",
		o.Transport, o.SizeBytes, o.Nodes, total, rate, worst, resends, dups), nil
}

// rttHops stops the sequencer, so that it writes when it published each
// packet, and joins that with the rtt node's stamps.
func rttHops(seq *proc.Proc, publishTimes, stamps string) (hopSummary, error) {
	seq.Stop()
	if _, err := seq.WaitLine("sequencer: stopped", 5*time.Second); err != nil {
		return hopSummary{}, err
	}
	spans, err := readPublishSpans(publishTimes)
	if err != nil {
		return hopSummary{}, err
	}
	samples, err := readStamps(stamps)
	if err != nil {
		return hopSummary{}, err
	}
	publishedAt(samples, spans)
	return summarizeHops(samples), nil
}

// latencyFields keeps the percentile fields of a node's rtt result line.
func latencyFields(line string) string {
	var keep []string
	for _, f := range strings.Fields(line) {
		for _, k := range []string{"p50_us=", "p90_us=", "p99_us=", "p999_us=", "max_us="} {
			if strings.HasPrefix(f, k) {
				keep = append(keep, f)
			}
		}
	}
	return strings.Join(keep, " ")
}

func histogramFromFile(dir, name, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var samples []int64
	for _, l := range strings.Fields(string(b)) {
		v, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return fmt.Errorf("bench: %s: %w", path, err)
		}
		samples = append(samples, v)
	}
	csv, png, err := writeHistogram(dir, name+"_rtt", samples)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: histogram %s %s\n", csv, png)
	return nil
}

// benchKeys writes the keys of an authenticated run into dir (a stream
// key, a command key shared by every account, a member key) and returns
// the flags that give them to every process.
func benchKeys(dir string) ([]string, error) {
	var args []string
	for _, k := range []struct {
		flag string
		key  wire.Key
	}{
		{"--security.stream-key-file", wire.NewKey(1, wire.KeyStream, 0)},
		{"--security.command-keys-file", wire.NewKey(2, wire.KeyCommand, 0)},
		{"--security.member-key-file", wire.NewKey(3, wire.KeyMember, 0)},
	} {
		path := filepath.Join(dir, k.key.Class.String()+".keys")
		if err := os.WriteFile(path, []byte(wire.FormatKey(k.key)), 0o600); err != nil {
			return nil, err
		}
		args = append(args, k.flag, path)
	}
	return args, nil
}
