package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/cpuid"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// The rtt bench's latency breakdown: where the microseconds of one round
// trip go. Every process of a bench runs on one host, so wall-clock
// readings (time.Now().UnixNano(), CLOCK_REALTIME) taken in different
// processes are comparable. Each round trip is cut at five instants, each
// read where it costs nothing extra or only in a bench:
//
//	sent      the node calls Send (the rtt node's own reading, as before)
//	out       the node called its transport's Flush, which hands the
//	          command to the kernel (TracedClient, bench only)
//	stamp     the sequencer stamped the record: its sequencer time, read
//	          once per poll batch, carried in the stream anyway
//	published the sequencer called its transport's Flush, which hands the
//	          packet to the kernel (TracedServer, `seqd sequencer
//	          --publish-times`, bench only)
//	in        the node's transport handed it the frame that delivered the
//	          message (TracedClient, bench only)
//	delivered OnMessage ran (the rtt node's own reading, as before)
//
// So node_send and seq are time in the processes before the send system
// call; to_seq and to_node are the kernel's send and receive paths (on
// loopback the sending call itself delivers the datagram) and the wake-up
// of the receiving process, until its poll hands the frame over. The hops
// between them add up to the round trip exactly, sample by
// sample. The library packages carry no hook: the bench wraps the
// transports it hands them, and only in rtt mode.

// RTTStamps are one round trip's instants (wall ns; 0: not known), and
// the CPUs the two network hops left and arrived on (-1: not known): the
// node's when it flushed the command (OutCPU) and when its poll handed
// over the frame that delivered it (InCPU), the sequencer's when its poll
// handed over the command (SeqInCPU) and when it flushed the packet
// (SeqOutCPU). A hop that arrives on another CPU than it left woke a
// thread there (on an idle VM, a halted vCPU; see docs/udp-rtt.md).
type RTTStamps struct {
	Seq                                        uint64
	Sent, Out, Stamp, Published, In, Delivered int64
	OutCPU, SeqInCPU, SeqOutCPU, InCPU         int
}

// crossings reports whether to_seq and to_node arrived on another CPU
// than they left; known is false when a CPU was not read.
func (s RTTStamps) crossings() (toSeq, toNode, known bool) {
	if s.OutCPU < 0 || s.SeqInCPU < 0 || s.SeqOutCPU < 0 || s.InCPU < 0 {
		return false, false, false
	}
	return s.OutCPU != s.SeqInCPU, s.SeqOutCPU != s.InCPU, true
}

// hopNames are the hops of a round trip, in order; the bench prints
// <name>_p50_us and <name>_p99_us for each.
var hopNames = [...]string{"node_send", "to_seq", "seq", "to_node", "node_recv"}

const hopCount = len(hopNames)

// hops splits one round trip into its hops (ns). ok is false when an
// instant is missing or the instants are out of order (a clock stepped, a
// resent command was the one sequenced): such a sample tells nothing.
func (s RTTStamps) hops() (h [hopCount]int64, ok bool) {
	t := [...]int64{s.Sent, s.Out, s.Stamp, s.Published, s.In, s.Delivered}
	for i := 1; i < len(t); i++ {
		if t[i-1] == 0 || t[i] < t[i-1] {
			return h, false
		}
		h[i-1] = t[i] - t[i-1]
	}
	return h, true
}

// hopSummary is the percentiles of each hop over the samples whose
// instants were all known and in order.
type hopSummary struct {
	N       int // samples used
	Skipped int // samples without every instant, or out of order
	Hops    [hopCount]LatencySummary
	// Same and Cross are the network hops (to_seq and to_node) of the
	// samples used whose CPUs are known: handed over on the CPU that sent
	// them, or woken on another.
	Same, Cross LatencySummary
}

func summarizeHops(samples []RTTStamps) hopSummary {
	var per [hopCount][]int64
	var same, cross []int64
	var s hopSummary
	for _, x := range samples {
		h, ok := x.hops()
		if !ok {
			s.Skipped++
			continue
		}
		for i := range h {
			per[i] = append(per[i], h[i])
		}
		s.N++
		if toSeq, toNode, known := x.crossings(); known {
			for _, hop := range [...]struct {
				d     int64
				cross bool
			}{{h[1], toSeq}, {h[3], toNode}} {
				if hop.cross {
					cross = append(cross, hop.d)
				} else {
					same = append(same, hop.d)
				}
			}
		}
	}
	for i := range per {
		s.Hops[i] = Summarize(per[i])
	}
	s.Same, s.Cross = Summarize(same), Summarize(cross)
	return s
}

// fields renders the median and p99 of each hop in microseconds, the
// bench line's unit.
func (s hopSummary) fields() string {
	var b strings.Builder
	for i, name := range hopNames {
		fmt.Fprintf(&b, "%s_p50_us=%.1f %s_p99_us=%.1f ", name, micros(s.Hops[i].P50), name, micros(s.Hops[i].P99))
	}
	fmt.Fprintf(&b, "hop_samples=%d", s.N)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, " hop_skipped=%d", s.Skipped)
	}
	if n := s.Same.N + s.Cross.N; n > 0 {
		// Where the network hops were handed over: the share that woke
		// a thread on another CPU, and the median of each kind.
		fmt.Fprintf(&b, " net_hops_cross_cpu_pct=%.0f net_hop_same_cpu_p50_us=%.1f net_hop_cross_cpu_p50_us=%.1f",
			100*float64(s.Cross.N)/float64(n), micros(s.Same.P50), micros(s.Cross.P50))
	}
	return b.String()
}

// writeCSV writes the hop percentiles to dir/<name>_rtt_hops.csv.
func (s hopSummary) writeCSV(dir, name string) (string, error) {
	var b strings.Builder
	b.WriteString("hop,samples,p50_us,p90_us,p99_us,p999_us,max_us\n")
	for i, h := range s.Hops {
		fmt.Fprintf(&b, "%s,%d,%.1f,%.1f,%.1f,%.1f,%.1f\n", hopNames[i], h.N,
			micros(h.P50), micros(h.P90), micros(h.P99), micros(h.P999), micros(h.Max))
	}
	path := filepath.Join(dir, name+"_rtt_hops.csv")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// publishSpan is one stream packet the sequencer handed to the kernel:
// seqs First..First+Count-1 at wall time At, from CPU OutCPU; InCPU is
// the CPU its poll last handed over a frame on before (-1: not known).
type publishSpan struct {
	First         uint64
	Count         int
	At            int64
	InCPU, OutCPU int
}

// publishedAt fills each sample's Published from spans (in the order they
// were published): the first time the packet holding its seq went out.
func publishedAt(samples []RTTStamps, spans []publishSpan) {
	sorted := slices.Clone(spans)
	// Stable, so that of two spans holding a seq (a repair) the first
	// published stays first.
	slices.SortStableFunc(sorted, func(a, b publishSpan) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	for i := range samples {
		seq := samples[i].Seq
		// The last span starting at or below seq, then back over equal
		// starts to the first published.
		j, _ := slices.BinarySearchFunc(sorted, seq+1, func(s publishSpan, t uint64) int {
			if s.First < t {
				return -1
			}
			return 1
		})
		j--
		if j < 0 {
			continue
		}
		for j > 0 && sorted[j-1].First == sorted[j].First {
			j--
		}
		if s := sorted[j]; seq < s.First+uint64(s.Count) {
			samples[i].Published = s.At
			samples[i].SeqInCPU, samples[i].SeqOutCPU = s.InCPU, s.OutCPU
		}
	}
}

// TracedClient is the rtt bench node's transport: it notes when a command
// frame went to the kernel and when each stream frame came in, for the
// latency breakdown. Its fields are touched by the node's Run goroutine
// only (Send, Flush, Poll and the handler Poll calls, which runs
// OnMessage). It reads the clock once per command flush and once per
// received frame: a bench instrument, never used outside `seqd bench`.
type TracedClient struct {
	transport.Client
	h       transport.Handler // the node's handler during a Poll
	onFrame transport.Handler // built once
	cmdSent bool              // a command frame was queued since the last Flush

	// out is the time the first command flush after the last take
	// began; in is when the frame being handled arrived. outCPU and
	// inCPU are the CPUs this goroutine ran on at those instants.
	out, in       int64
	outCPU, inCPU int
}

// tracedWakeClient is a TracedClient over a client that can be woken, so
// that the node keeps blocking in Poll as it does without the trace.
type tracedWakeClient struct {
	*TracedClient
	w transport.Waker
}

func (c tracedWakeClient) Wake() { c.w.Wake() }

// TraceClient wraps cl; use the returned Client for the node and the
// *TracedClient to read the instants.
func TraceClient(cl transport.Client) (transport.Client, *TracedClient) {
	t := &TracedClient{Client: cl}
	t.onFrame = t.frame
	if w, ok := cl.(transport.Waker); ok {
		return tracedWakeClient{TracedClient: t, w: w}, t
	}
	return t, t
}

func (c *TracedClient) Send(frame []byte) error {
	if k, err := wire.PeekKind(frame); err == nil && k == wire.KindCommand {
		c.cmdSent = true
	}
	return c.Client.Send(frame)
}

// Flush notes the time before the call: on loopback the send system call
// itself carries the datagram to the receiving socket and may return after
// the sequencer already read it.
func (c *TracedClient) Flush() error {
	if c.cmdSent {
		c.cmdSent = false
		if c.out == 0 {
			c.out = time.Now().UnixNano()
			c.outCPU = cpuid.Current()
		}
	}
	return c.Client.Flush()
}

func (c *TracedClient) Poll(h transport.Handler, wait time.Duration) (int, error) {
	c.h = h
	return c.Client.Poll(c.onFrame, wait)
}

func (c *TracedClient) frame(f []byte, from transport.Peer) {
	c.in = time.Now().UnixNano()
	c.inCPU = cpuid.Current()
	c.h(f, from)
}

// Take returns the instants of the message being delivered now (call it
// from OnMessage) and starts watching for the next command's flush.
func (c *TracedClient) Take() (out, in int64) {
	out = c.out
	c.out = 0
	return out, c.in
}

// CPUs returns the CPUs of the instants the last Take returned.
func (c *TracedClient) CPUs() (out, in int) { return c.outCPU, c.inCPU }

// maxPublishSpans bounds the spans a TracedServer keeps (24 bytes each),
// allocated when the trace is asked for.
const maxPublishSpans = 1 << 20

// TracedServer is the sequencer's transport under `seqd sequencer
// --publish-times`: it notes when the Flush that sends each first-sent
// data packet began. Used by the agent's Run goroutine only. A packet the
// transport sent on its own within a Poll (a full batch) is stamped at
// the next Flush, a little late; the rtt bench's one message in flight
// never fills a batch.
type TracedServer struct {
	transport.Server
	h       transport.Handler // the agent's handler during a Poll
	onFrame transport.Handler // built once
	inCPU   int               // the CPU the last frame was handed over on
	pkt     wire.Packet
	pending []publishSpan // published since the last Flush
	spans   []publishSpan
	lost    int // spans beyond maxPublishSpans
}

// NewTracedServer wraps srv; Write saves what it noted.
func NewTracedServer(srv transport.Server) *TracedServer {
	s := &TracedServer{Server: srv, inCPU: -1, pending: make([]publishSpan, 0, 64), spans: make([]publishSpan, 0, 4096)}
	s.onFrame = s.frame
	return s
}

// Poll notes the CPU each frame is handed over on.
func (s *TracedServer) Poll(h transport.Handler, wait time.Duration) (int, error) {
	s.h = h
	return s.Server.Poll(s.onFrame, wait)
}

func (s *TracedServer) frame(f []byte, from transport.Peer) {
	s.inCPU = cpuid.Current()
	s.h(f, from)
}

func (s *TracedServer) Publish(frame []byte) error {
	if wire.DecodePacket(frame, &s.pkt) == nil && s.pkt.Kind == wire.KindData &&
		s.pkt.Flags&wire.PacketRetransmit == 0 && s.pkt.Count > 0 {
		s.pending = append(s.pending, publishSpan{First: s.pkt.FirstSeq, Count: s.pkt.Count})
	}
	return s.Server.Publish(frame)
}

// Flush notes the time before the call, as TracedClient.Flush does.
func (s *TracedServer) Flush() error {
	if len(s.pending) > 0 {
		at, cpu := time.Now().UnixNano(), cpuid.Current()
		for _, p := range s.pending {
			if len(s.spans) == maxPublishSpans {
				s.lost++
				continue
			}
			p.At, p.InCPU, p.OutCPU = at, s.inCPU, cpu
			s.spans = append(s.spans, p)
		}
		s.pending = s.pending[:0]
	}
	return s.Server.Flush()
}

// Write saves the spans, one "first count unix_ns in_cpu out_cpu" line each.
func (s *TracedServer) Write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, p := range s.spans {
		fmt.Fprintf(w, "%d %d %d %d %d\n", p.First, p.Count, p.At, p.InCPU, p.OutCPU)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readPublishSpans(path string) ([]publishSpan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var spans []publishSpan
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Three fields (no CPUs, as written before they were noted) or five.
		p := publishSpan{InCPU: -1, OutCPU: -1}
		fields := []any{&p.First, &p.Count, &p.At, &p.InCPU, &p.OutCPU}
		if n := len(strings.Fields(sc.Text())); n == 3 {
			fields = fields[:3]
		}
		if _, err := fmt.Sscan(sc.Text(), fields...); err != nil {
			return nil, fmt.Errorf("bench: %s: %q: %w", path, sc.Text(), err)
		}
		spans = append(spans, p)
	}
	return spans, sc.Err()
}

// WriteStamps saves the rtt node's instants, one sample per line:
// seq sent out stamp in delivered (wall ns) out_cpu in_cpu.
func WriteStamps(path string, samples []RTTStamps) error {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%d %d %d %d %d %d %d %d\n", s.Seq, s.Sent, s.Out, s.Stamp, s.In, s.Delivered, s.OutCPU, s.InCPU)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readStamps(path string) ([]RTTStamps, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []RTTStamps
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// Six fields (no CPUs, as written before they were noted) or eight.
		f := strings.Fields(l)
		if len(f) != 6 && len(f) != 8 {
			return nil, fmt.Errorf("bench: %s: %q: want 6 or 8 fields", path, l)
		}
		v := [8]int64{6: -1, 7: -1}
		for i := range f {
			if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				return nil, fmt.Errorf("bench: %s: %w", path, err)
			}
		}
		out = append(out, RTTStamps{Seq: uint64(v[0]), Sent: v[1], Out: v[2], Stamp: v[3], In: v[4], Delivered: v[5],
			OutCPU: int(v[6]), InCPU: int(v[7]), SeqInCPU: -1, SeqOutCPU: -1})
	}
	return out, nil
}
