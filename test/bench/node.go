package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// NodeConfig is a load or round-trip node: `seqd node`, which every bench
// process run starts as its senders and receivers.
type NodeConfig struct {
	// Node is the node library's configuration (account, window, mode).
	Node node.Config
	// Count commands are sent (none when Node.ReadOnly); the node is done
	// once all are acknowledged and Expect messages of other accounts
	// were delivered.
	Count, Expect int
	// SizeBytes is the payload of each command (test/check's pattern).
	SizeBytes int
	// Rate is commands per second (0: as fast as the window allows).
	Rate int
	// RTT: send a command, wait to see it, repeat; report percentiles.
	RTT bool
	// SamplesPath (RTT) receives the round trips, ns, one per line.
	SamplesPath string
	// StampsPath (RTT) receives when each round trip passed each hop
	// (TraceClient, WriteStamps), for the latency breakdown.
	StampsPath string
	// IdleSpin keeps the node polling this long after each frame.
	IdleSpin time.Duration
	// Logger hears send errors; nil logs nowhere.
	Logger *slog.Logger
	// WaitForHistory holds the first send until the node delivered its
	// first message (from Node.RewindFrom): a node with no replayer to
	// rewind from, started after the sequencer's ring dropped seq 1,
	// then fails (node.ErrUnrecoverable) before it sent anything, rather
	// than after its commands went into the stream.
	WaitForHistory bool
}

// StoppedError is Run's error when the node ended, or its context did,
// before it was done: the caller tells a stop it asked for (a signal)
// from a failure.
type StoppedError struct{ Err error }

func (e *StoppedError) Error() string { return e.Err.Error() }
func (e *StoppedError) Unwrap() error { return e.Err }

// Progress is how far a node got.
type Progress struct {
	Count, Acked, Expect, Others int
	LastSeq                      uint64
}

// streamChecker verifies a delivered stream: dense sequence numbers, each
// sender's commands once and in order (test/check), and this node's own
// payloads intact. The zero value is ready (self unset). It stops at the
// first fault (err).
type streamChecker struct {
	self     wire.Account
	instance uint8
	stream   check.Stream
	last     uint64
	err      error
}

func (k *streamChecker) check(m *node.Message) {
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

// LoadNode is a node that sends Count commands (at a rate, or one round
// trip at a time), verifies the whole stream from seq 1 and measures.
type LoadNode struct {
	cfg    NodeConfig
	n      *node.Node
	check  streamChecker
	count  int
	expect int
	rtt    bool

	live         bool // this incarnation was announced in the stream
	mine, others int
	first, lastT time.Time // the first message and the one that completed the run
	atDone       int       // messages delivered by then
	done         chan struct{}
	doneOnce     sync.Once
	history      chan struct{} // closed at the first delivered message
	seenFirst    bool

	// rtt mode
	sentAt  int64
	samples []int64
	payload []byte
	trace   *TracedClient // with StampsPath
	stamps  []RTTStamps

	allocs0 atomic.Uint64
}

// NewLoadNode builds the node on client (validating cfg.Node); Node gives
// it to the caller for its rewind sources before Run.
func NewLoadNode(cfg NodeConfig, client transport.Client) (*LoadNode, error) {
	count := cfg.Count
	if cfg.Node.ReadOnly {
		count = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &LoadNode{cfg: cfg, count: count, expect: cfg.Expect, rtt: cfg.RTT, done: make(chan struct{}), history: make(chan struct{}), payload: make([]byte, cfg.SizeBytes)}
	if cfg.Node.Account != "" {
		var err error
		if c.check.self, err = wire.ParseAccount(cfg.Node.Account); err != nil {
			return nil, err
		}
	}
	c.check.instance = cfg.Node.Instance
	nodeClient := client
	if c.rtt {
		c.samples = make([]int64, 0, count)
		if cfg.StampsPath != "" {
			nodeClient, c.trace = TraceClient(client)
			c.stamps = make([]RTTStamps, 0, count)
		}
	}
	var err error
	if c.n, err = node.New(cfg.Node, c, nodeClient); err != nil {
		return nil, err
	}
	c.n.SetIdleSpin(cfg.IdleSpin)
	return c, nil
}

// Node is the node the load runs on.
func (c *LoadNode) Node() *node.Node { return c.n }

// Progress is how far the node got (after Run).
func (c *LoadNode) Progress() Progress {
	return Progress{Count: c.count, Acked: c.mine, Expect: c.expect, Others: c.others, LastSeq: c.check.last}
}

// OnMessage verifies m, counts it and, in rtt mode, sends the next
// command when m is this node's.
func (c *LoadNode) OnMessage(m *node.Message) {
	c.check.check(m)
	if !c.seenFirst {
		c.seenFirst = true
		close(c.history)
	}
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
				c.stamps = append(c.stamps, RTTStamps{Seq: m.Seq, Sent: c.sentAt, Out: out, Stamp: m.Time, In: in, Delivered: now.UnixNano(),
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
func (c *LoadNode) sendRTT(cmd uint64) error {
	check.FillPayload(c.payload, cmd)
	c.sentAt = time.Now().UnixNano()
	// TrySend: this runs inside OnMessage, and one command is in flight
	// at a time, so the window always has room.
	if _, err := c.n.TrySend(c.payload); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// Run runs the node until it is done, then returns the fields of its
// result line (`node: ok FIELDS`) and writes SamplesPath and StampsPath.
// A node that ends, or whose ctx ends, before it is done returns a
// *StoppedError.
func (c *LoadNode) Run(ctx context.Context) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- c.n.Run(ctx) }()

	start := time.Now()
	if c.count == 0 && c.expect == 0 {
		c.doneOnce.Do(func() { close(c.done) })
	}
	if c.cfg.WaitForHistory && c.count > 0 {
		select {
		case <-c.history:
		case err := <-runErr:
			if err == nil || errors.Is(err, context.Canceled) {
				err = fmt.Errorf("stopped before the first message: nothing sent")
			}
			return "", &StoppedError{Err: err}
		case <-ctx.Done():
			return "", &StoppedError{Err: fmt.Errorf("%v before the first message: nothing sent", ctx.Err())}
		}
	}
	switch {
	case c.count == 0:
	case c.rtt:
		// The first command; OnMessage sends each next one on seeing it.
		if err := c.sendRTT(1); err != nil {
			return "", err
		}
	default:
		go c.sendAll(ctx)
	}
	select {
	case <-c.done:
	case err := <-runErr:
		if err == nil || errors.Is(err, context.Canceled) {
			err = fmt.Errorf("stopped before done: mine=%d/%d others=%d/%d", c.mine, c.count, c.others, c.expect)
		}
		return "", &StoppedError{Err: err}
	case <-ctx.Done():
		return "", &StoppedError{Err: fmt.Errorf("%v before done: mine=%d/%d others=%d/%d", ctx.Err(), c.mine, c.count, c.others, c.expect)}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	cancel()
	<-runErr
	if c.check.err != nil {
		return "", fmt.Errorf("verification failed: %w", c.check.err)
	}
	delivered := c.mine + c.others
	span := c.lastT.Sub(c.first)
	rate, allocs := 0.0, 0.0
	if delivered > 0 && span > 0 {
		rate = float64(c.atDone) / span.Seconds()
		allocs = float64(ms.Mallocs-c.allocs0.Load()) / float64(delivered)
	}
	st := c.n.Stats()
	fields := fmt.Sprintf("account=%s sent=%d acked=%d delivered=%d others=%d last_seq=%d span_s=%.3f rate=%.0f allocs_per_msg=%.4f elapsed_s=%.3f resends=%d resend_events=%d srtt_us=%d rto_us=%d command_frames=%d held_packets=%d turns=%d",
		OrDash(c.cfg.Node.Account), c.count, c.mine, delivered, c.others, c.check.last, span.Seconds(), rate, allocs, time.Since(start).Seconds(),
		st.Resends, st.ResendScans, st.SmoothedRTT.Microseconds(), st.ResendTimeout.Microseconds(), st.CommandFrames, st.HeldPackets, st.Turns)
	if c.rtt {
		fields += " " + Summarize(c.samples).Fields()
		if p := c.cfg.SamplesPath; p != "" {
			if err := writeSamples(p, c.samples); err != nil {
				return "", err
			}
		}
		if p := c.cfg.StampsPath; p != "" {
			if err := WriteStamps(p, c.stamps); err != nil {
				return "", err
			}
		}
	}
	return fields, nil
}

func (c *LoadNode) sendAll(ctx context.Context) {
	p := make([]byte, c.cfg.SizeBytes)
	var interval time.Duration
	if c.cfg.Rate > 0 {
		interval = time.Second / time.Duration(c.cfg.Rate)
	}
	next := time.Now()
	for i := 1; i <= c.count && ctx.Err() == nil; i++ {
		check.FillPayload(p, uint64(i))
		if _, err := c.n.SendContext(ctx, p); err != nil {
			if ctx.Err() == nil {
				c.cfg.Logger.Error("send", "cmd", i, "err", err)
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

// OrDash is s, or "-" for an empty account in a result line.
func OrDash(s string) string {
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
