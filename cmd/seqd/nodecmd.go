package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/bench"
	"github.com/seqd/seqd/test/check"
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
		options.Int("expect", 0, "also wait until this many messages of other accounts were delivered"),
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
	), gossipFlags(false)...))
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

// checker verifies a delivered stream: dense sequence numbers, each
// sender's commands once and in order (test/check), and this node's own
// payloads intact. The zero value is ready (self unset). It stops at the
// first fault (err).
type checker struct {
	self     wire.Account
	instance uint8
	stream   check.Stream
	last     uint64
	err      error
}

func (k *checker) check(m *node.Message) {
	if k.err != nil {
		return
	}
	v := k.stream.Observe(m)
	if v.Fault != check.SeqRepeat && v.Fault != check.SeqGap {
		k.last = m.Seq
	}
	if v.Fault != check.OK {
		k.err = v.Err()
		return
	}
	if !m.Internal() && m.Account == k.self && m.Instance == k.instance && !check.PayloadOK(m.Payload, m.CmdSeq) {
		k.err = fmt.Errorf("seq %d: my command %d came back corrupt", m.Seq, m.CmdSeq)
	}
}

type cliNode struct {
	n      *node.Node
	check  checker
	count  int
	expect int
	rtt    bool

	live         bool // this incarnation was announced in the stream
	mine, others int
	first, lastT time.Time // the first message and the one that completed the run
	atDone       int       // messages delivered by then
	done         chan struct{}
	doneOnce     sync.Once

	// rtt mode
	sentAt  int64
	samples []int64
	payload []byte
	trace   *bench.TracedClient // with --stamps
	stamps  []bench.RTTStamps

	allocs0 atomic.Uint64
}

func (c *cliNode) OnMessage(m *node.Message) {
	c.check.check(m)
	if m.Internal() {
		// This process's own commands start after its incarnation is
		// announced; earlier ones of this account are a previous life's.
		var in wire.Internal
		if m.DecodeInternal(&in) == nil && in.Type == wire.InternalIncarnation &&
			in.Account == c.check.self && in.Instance == c.check.instance && in.Value == c.n.Incarnation() {
			c.live = true
		}
		return
	}
	// The clock is read for the first message, each round trip and the
	// last message only: a reading per message cost a throughput node
	// 13-17% of its CPU.
	var now time.Time
	if c.first.IsZero() {
		now = time.Now()
		c.first = now
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		c.allocs0.Store(ms.Mallocs)
	}
	if m.Account == c.check.self && m.Instance == c.check.instance && c.live {
		c.mine++
		if c.rtt {
			if now.IsZero() {
				now = time.Now()
			}
			c.samples = append(c.samples, now.UnixNano()-c.sentAt)
			if c.trace != nil {
				out, in := c.trace.Take()
				outCPU, inCPU := c.trace.CPUs()
				c.stamps = append(c.stamps, bench.RTTStamps{Seq: m.Seq, Sent: c.sentAt, Out: out, Stamp: m.Time, In: in, Delivered: now.UnixNano(),
					OutCPU: outCPU, InCPU: inCPU, SeqInCPU: -1, SeqOutCPU: -1})
			}
			if c.mine < c.count {
				if err := c.sendRTT(uint64(c.mine + 1)); err != nil && c.check.err == nil {
					c.check.err = err
				}
			}
		}
	} else {
		c.others++
	}
	if c.check.err != nil || (c.mine >= c.count && c.others >= c.expect) {
		if c.lastT.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			c.lastT, c.atDone = now, c.mine+c.others
		}
		c.doneOnce.Do(func() { close(c.done) })
	}
}

// sendRTT sends command cmd of a round-trip run and notes when.
func (c *cliNode) sendRTT(cmd uint64) error {
	check.FillPayload(c.payload, cmd)
	c.sentAt = time.Now().UnixNano()
	// TrySend: this runs inside OnMessage, and one command is in flight
	// at a time, so the window always has room.
	if _, err := c.n.TrySend(c.payload); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

func runNode(cc *cli.Context) error {
	log := options.NewLogger(cc)
	cfg := node.DefaultConfig()
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
	if cfg.ReadOnly {
		count = 0
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
	c := &cliNode{count: count, expect: cc.Int("expect"), rtt: cc.Bool("rtt"), done: make(chan struct{}), payload: make([]byte, size)}
	if cfg.Account != "" {
		c.check.self, err = wire.ParseAccount(cfg.Account)
		if err != nil {
			return options.KeyError("account", fmt.Sprintf("%q", cfg.Account), "1..8 printable ASCII bytes")
		}
	}
	c.check.instance = cfg.Instance
	nodeClient := client
	if c.rtt {
		c.samples = make([]int64, 0, count)
		if cc.String("stamps") != "" {
			nodeClient, c.trace = bench.TraceClient(client)
			c.stamps = make([]bench.RTTStamps, 0, count)
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
	c.n, err = node.New(cfg, c, nodeClient)
	if err != nil {
		return options.Keyed(err, nodeKeys)
	}
	tiered.SetRewind(c.n, log, rewinds, agent, cfg.Session)
	c.n.SetIdleSpin(cc.Duration("node.idle-spin"))
	// cc.Context is done on SIGTERM or SIGINT, even one sent during
	// start-up: the node then stops with exitInterrupted.
	ctx, cancel := context.WithTimeout(cc.Context, cc.Duration("timeout"))
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- c.n.Run(ctx) }()
	go transport.WarnSilence(ctx, log, client, listenAddress(cc), cc.Duration("stream-warn-after"))

	start := time.Now()
	if count == 0 && c.expect == 0 {
		c.doneOnce.Do(func() { close(c.done) })
	}
	switch {
	case count == 0:
	case c.rtt:
		// The first command; OnMessage sends each next one on seeing it.
		if err := c.sendRTT(1); err != nil {
			return err
		}
	default:
		go c.sendAll(ctx, log, cc.Int("rate"), size)
	}
	select {
	case <-c.done:
	case err := <-runErr:
		if stopsignal.Received() != nil {
			return c.interrupted(cfg.Account)
		}
		if err == nil || errors.Is(err, context.Canceled) {
			return fmt.Errorf("stopped before done: mine=%d/%d others=%d/%d", c.mine, c.count, c.others, c.expect)
		}
		return err
	case <-ctx.Done():
		if stopsignal.Received() != nil {
			return c.interrupted(cfg.Account)
		}
		return fmt.Errorf("%v before done: mine=%d/%d others=%d/%d", ctx.Err(), c.mine, c.count, c.others, c.expect)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cancel()
	<-runErr
	if c.check.err != nil {
		return fmt.Errorf("verification failed: %w", c.check.err)
	}
	delivered := c.mine + c.others
	span := c.lastT.Sub(c.first)
	rate, allocs := 0.0, 0.0
	if delivered > 0 && span > 0 {
		rate = float64(c.atDone) / span.Seconds()
		allocs = float64(ms.Mallocs-c.allocs0.Load()) / float64(delivered)
	}
	st := c.n.Stats()
	fields := fmt.Sprintf("account=%s sent=%d acked=%d delivered=%d others=%d last_seq=%d span_s=%.3f rate=%.0f allocs_per_msg=%.4f elapsed_s=%.3f resends=%d resend_events=%d srtt_us=%d rto_us=%d",
		orDash(cfg.Account), count, c.mine, delivered, c.others, c.check.last, span.Seconds(), rate, allocs, time.Since(start).Seconds(),
		st.Resends, st.ResendScans, st.SmoothedRTT.Microseconds(), st.ResendTimeout.Microseconds())
	if c.rtt {
		fields += " " + bench.Summarize(c.samples).Fields()
		if p := cc.String("samples"); p != "" {
			if err := writeSamples(p, c.samples); err != nil {
				return err
			}
		}
		if p := cc.String("stamps"); p != "" {
			if err := bench.WriteStamps(p, c.stamps); err != nil {
				return err
			}
		}
	}
	fmt.Println("node: ok " + fields)
	return nil
}

// interrupted ends a node stopped by SIGTERM or SIGINT before it was done
// (during start-up included): a stopped line on stdout, exitInterrupted.
func (c *cliNode) interrupted(account string) error {
	fmt.Printf("node: stopped account=%s count=%d acked=%d others=%d last_seq=%d signal=%s\n",
		orDash(account), c.count, c.mine, c.others, c.check.last, stopsignal.Received())
	return &codedError{code: exitInterrupted, err: fmt.Errorf("stopped by %v before done: acked %d of %d, others %d of %d", stopsignal.Received(), c.mine, c.count, c.others, c.expect)}
}

func (c *cliNode) sendAll(ctx context.Context, log *slog.Logger, rate, size int) {
	p := make([]byte, size)
	var interval time.Duration
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	next := time.Now()
	for i := 1; i <= c.count && ctx.Err() == nil; i++ {
		check.FillPayload(p, uint64(i))
		if _, err := c.n.SendContext(ctx, p); err != nil {
			if ctx.Err() == nil {
				log.Error("send", "cmd", i, "err", err)
			}
			return
		}
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeSamples(path string, samples []int64) error {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%d\n", s)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
