package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/cpuid"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

func TestRTTStamps_HopsAddUpToTheRoundTrip(t *testing.T) {
	s := RTTStamps{Seq: 7, Sent: 1000, Out: 1003, Stamp: 1010, Published: 1012, In: 1030, Delivered: 1031}
	h, ok := s.hops()
	if !ok {
		t.Fatal("hops of ordered instants: not ok")
	}
	want := [hopCount]int64{3, 7, 2, 18, 1}
	if h != want {
		t.Fatalf("hops = %v, want %v", h, want)
	}
	var sum int64
	for _, d := range h {
		sum += d
	}
	if sum != s.Delivered-s.Sent {
		t.Fatalf("hops add up to %d, the round trip is %d", sum, s.Delivered-s.Sent)
	}
}

func TestRTTStamps_MissingOrDisorderedInstantsAreSkipped(t *testing.T) {
	good := RTTStamps{Seq: 1, Sent: 100, Out: 110, Stamp: 120, Published: 130, In: 140, Delivered: 150}
	noPublish := good
	noPublish.Published = 0
	resentFirst := good
	resentFirst.Out = 125 // the flush noted came after the sequencer stamped
	for _, s := range []RTTStamps{noPublish, resentFirst} {
		if _, ok := s.hops(); ok {
			t.Errorf("%+v: hops ok, want skipped", s)
		}
	}
	sum := summarizeHops([]RTTStamps{good, noPublish, resentFirst, good})
	if sum.N != 2 || sum.Skipped != 2 {
		t.Fatalf("N=%d Skipped=%d, want 2 and 2", sum.N, sum.Skipped)
	}
	if sum.Hops[3].P50 != 10 {
		t.Fatalf("to_node p50 = %v, want 10ns", sum.Hops[3].P50)
	}
}

func TestSummarizeHops_MediansPerHop(t *testing.T) {
	// Three round trips: the median of each hop is taken over that hop
	// alone (medians of hops need not add up to the median round trip).
	var samples []RTTStamps
	for i, d := range [][hopCount]int64{
		{1000, 20000, 3000, 25000, 2000},
		{2000, 10000, 1000, 30000, 1000},
		{3000, 30000, 2000, 20000, 3000},
	} {
		s := RTTStamps{Seq: uint64(i + 1), Sent: 1_000_000}
		s.Out = s.Sent + d[0]
		s.Stamp = s.Out + d[1]
		s.Published = s.Stamp + d[2]
		s.In = s.Published + d[3]
		s.Delivered = s.In + d[4]
		samples = append(samples, s)
	}
	sum := summarizeHops(samples)
	want := [hopCount]time.Duration{2 * time.Microsecond, 20 * time.Microsecond, 2 * time.Microsecond, 25 * time.Microsecond, 2 * time.Microsecond}
	for i := range want {
		if sum.Hops[i].P50 != want[i] {
			t.Errorf("%s p50 = %v, want %v", hopNames[i], sum.Hops[i].P50, want[i])
		}
		if sum.Hops[i].P99 != time.Duration(slices.Max(samplesHop(samples, i))) {
			t.Errorf("%s p99 = %v, want the largest of three", hopNames[i], sum.Hops[i].P99)
		}
	}
	f := sum.fields()
	for _, w := range []string{"node_send_p50_us=2.0", "to_seq_p50_us=20.0", "to_seq_p99_us=30.0", "seq_p50_us=2.0", "to_node_p50_us=25.0", "node_recv_p50_us=2.0", "hop_samples=3"} {
		if !strings.Contains(f, w) {
			t.Errorf("fields %q lack %q", f, w)
		}
	}
	if strings.Contains(f, "hop_skipped") {
		t.Errorf("fields %q name skipped samples; none were", f)
	}
}

// The network hops are split by whether they arrived on the CPU they
// left: the share that crossed, and the median of each kind; samples
// whose CPUs were not read count in neither.
func TestSummarizeHops_NetworkHopsBySameOrOtherCPU(t *testing.T) {
	mk := func(seq uint64, toSeq, toNode int64, out, seqIn, seqOut, in int) RTTStamps {
		s := RTTStamps{Seq: seq, Sent: 1_000_000, OutCPU: out, SeqInCPU: seqIn, SeqOutCPU: seqOut, InCPU: in}
		s.Out = s.Sent + 1000
		s.Stamp = s.Out + toSeq
		s.Published = s.Stamp + 1000
		s.In = s.Published + toNode
		s.Delivered = s.In + 1000
		return s
	}
	samples := []RTTStamps{
		mk(1, 4000, 5000, 0, 0, 0, 0),     // both hops on CPU 0
		mk(2, 10000, 12000, 0, 1, 1, 0),   // both hops crossed
		mk(3, 6000, 11000, 1, 1, 1, 0),    // to_seq same, to_node crossed
		mk(4, 99000, 99000, -1, 0, 0, -1), // CPUs unknown: in neither
	}
	sum := summarizeHops(samples)
	if sum.N != 4 || sum.Same.N != 3 || sum.Cross.N != 3 {
		t.Fatalf("N=%d same=%d cross=%d, want 4, 3 and 3", sum.N, sum.Same.N, sum.Cross.N)
	}
	if sum.Same.P50 != 5*time.Microsecond || sum.Cross.P50 != 11*time.Microsecond {
		t.Fatalf("same p50 %v cross p50 %v, want 5us and 11us", sum.Same.P50, sum.Cross.P50)
	}
	f := sum.fields()
	for _, w := range []string{"net_hops_cross_cpu_pct=50", "net_hop_same_cpu_p50_us=5.0", "net_hop_cross_cpu_p50_us=11.0"} {
		if !strings.Contains(f, w) {
			t.Errorf("fields %q lack %q", f, w)
		}
	}
	if f := summarizeHops(samples[3:]).fields(); strings.Contains(f, "net_hop") {
		t.Errorf("fields %q name CPUs no sample knew", f)
	}
}

func samplesHop(s []RTTStamps, i int) []int64 {
	var out []int64
	for _, x := range s {
		h, _ := x.hops()
		out = append(out, h[i])
	}
	return out
}

func TestPublishedAt_FirstPacketHoldingTheSeq(t *testing.T) {
	spans := []publishSpan{
		{First: 5, Count: 3, At: 500}, // 5..7
		{First: 1, Count: 4, At: 100}, // 1..4 (listed out of order)
		{First: 5, Count: 1, At: 900}, // 5 again later: not the first send
		{First: 10, Count: 1, At: 1000},
	}
	spans[0].InCPU, spans[0].OutCPU = 1, 0
	samples := []RTTStamps{{Seq: 1}, {Seq: 4}, {Seq: 5}, {Seq: 7}, {Seq: 8}, {Seq: 10}, {Seq: 11}}
	for i := range samples {
		samples[i].SeqInCPU, samples[i].SeqOutCPU = -1, -1
	}
	publishedAt(samples, spans)
	want := []int64{100, 100, 500, 500, 0, 1000, 0}
	for i, s := range samples {
		if s.Published != want[i] {
			t.Errorf("seq %d: published at %d, want %d", s.Seq, s.Published, want[i])
		}
	}
	if s := samples[2]; s.SeqInCPU != 1 || s.SeqOutCPU != 0 {
		t.Errorf("seq 5: sequencer CPUs in %d out %d, want the span's 1 and 0", s.SeqInCPU, s.SeqOutCPU)
	}
	if s := samples[4]; s.SeqInCPU != -1 || s.SeqOutCPU != -1 {
		t.Errorf("seq 8 (never published): sequencer CPUs %d %d, want unknown", s.SeqInCPU, s.SeqOutCPU)
	}
}

func TestStampsAndSpans_RoundTripThroughFiles(t *testing.T) {
	dir := t.TempDir()
	// The node writes its own CPUs; the sequencer's come from the spans.
	in := []RTTStamps{{Seq: 3, Sent: 1, Out: 2, Stamp: 3, In: 5, Delivered: 6, OutCPU: 1, InCPU: 0, SeqInCPU: -1, SeqOutCPU: -1}}
	p := filepath.Join(dir, "stamps.txt")
	if err := WriteStamps(p, in); err != nil {
		t.Fatal(err)
	}
	got, err := readStamps(p)
	if err != nil || len(got) != 1 || got[0] != in[0] {
		t.Fatalf("readStamps = %+v, %v; want %+v", got, err, in)
	}
	srv := NewTracedServer(nopServer{})
	srv.spans = append(srv.spans, publishSpan{First: 9, Count: 2, At: 77, InCPU: 1, OutCPU: 0})
	sp := filepath.Join(dir, "spans.txt")
	if err := srv.Write(sp); err != nil {
		t.Fatal(err)
	}
	spans, err := readPublishSpans(sp)
	if err != nil || len(spans) != 1 || spans[0] != (publishSpan{First: 9, Count: 2, At: 77, InCPU: 1, OutCPU: 0}) {
		t.Fatalf("readPublishSpans = %+v, %v", spans, err)
	}
	// Files written before the CPUs were noted still read, CPUs unknown.
	old := filepath.Join(dir, "old.txt")
	if err := os.WriteFile(old, []byte("9 2 77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if spans, err := readPublishSpans(old); err != nil || len(spans) != 1 || spans[0] != (publishSpan{First: 9, Count: 2, At: 77, InCPU: -1, OutCPU: -1}) {
		t.Fatalf("readPublishSpans of an old file = %+v, %v", spans, err)
	}
	if err := os.WriteFile(old, []byte("3 1 2 3 5 6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readStamps(old); err != nil || len(got) != 1 || got[0].OutCPU != -1 || got[0].InCPU != -1 || got[0].Delivered != 6 {
		t.Fatalf("readStamps of an old file = %+v, %v", got, err)
	}
	if err := os.WriteFile(p, []byte("1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readStamps(p); err == nil {
		t.Fatal("readStamps of a short line: no error")
	}
}

func TestTracedServer_NotesFirstSentDataPackets(t *testing.T) {
	srv := NewTracedServer(nopServer{})
	buf := make([]byte, 1500)
	var w wire.PacketWriter
	if err := w.Reset(buf, wire.KindData, 1, 1, 42, 1000, 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := w.Append(&wire.Record{Time: 1000, Account: wire.MustAccount("A"), CmdSeq: uint64(i + 1), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	data := w.Bytes()
	hb, err := wire.AppendHeartbeat(make([]byte, 100), 1, 1, 44, 43, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = srv.Publish(hb)
	_ = srv.Publish(data)
	if len(srv.spans) != 0 {
		t.Fatal("a span noted before Flush")
	}
	_ = srv.Flush()
	if len(srv.spans) != 1 || srv.spans[0].First != 42 || srv.spans[0].Count != 2 || srv.spans[0].At == 0 {
		t.Fatalf("spans = %+v, want one for seqs 42..43 with a time", srv.spans)
	}
	// No frame was handed over yet: the CPU it came in on is unknown.
	if srv.spans[0].InCPU != -1 {
		t.Fatalf("span in CPU %d before any frame came in, want -1", srv.spans[0].InCPU)
	}
	// A frame handed over by a Poll notes its CPU for the next span.
	got := 0
	fs := NewTracedServer(frameServer{})
	if _, err := fs.Poll(func([]byte, transport.Peer) { got++ }, 0); err != nil || got != 1 {
		t.Fatalf("Poll: %d frames to the agent's handler, %v; want 1", got, err)
	}
	_ = fs.Publish(data)
	_ = fs.Flush()
	if cpuid.Current() >= 0 && (fs.spans[0].InCPU < 0 || fs.spans[0].OutCPU < 0) {
		t.Fatalf("span CPUs in %d out %d: want both read", fs.spans[0].InCPU, fs.spans[0].OutCPU)
	}
}

// frameServer hands one frame to each Poll.
type frameServer struct{ nopServer }

func (frameServer) Poll(h transport.Handler, _ time.Duration) (int, error) {
	h([]byte{1}, transport.NoPeer)
	return 1, nil
}

type nopServer struct{}

func (nopServer) Publish([]byte) error                               { return nil }
func (nopServer) SendTo(transport.Peer, []byte) error                { return nil }
func (nopServer) Flush() error                                       { return nil }
func (nopServer) Poll(transport.Handler, time.Duration) (int, error) { return 0, nil }
func (nopServer) Close() error                                       { return nil }

// nopClient hands one frame to each Poll.
type nopClient struct{ frame []byte }

func (nopClient) Send([]byte) error { return nil }
func (nopClient) Flush() error      { return nil }
func (nopClient) Close() error      { return nil }
func (c nopClient) Poll(h transport.Handler, _ time.Duration) (int, error) {
	h(c.frame, transport.NoPeer)
	return 1, nil
}

// The rtt bench's wrappers sit on the hot path of the processes they
// measure: they allocate nothing per frame.
func TestTracedTransports_AllocateNothingPerFrame(t *testing.T) {
	var cw wire.CommandWriter
	if err := cw.Reset(make([]byte, 256), wire.MustAccount("A"), 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := cw.Append(&wire.Command{CmdSeq: 1, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	cmd := cw.Bytes()
	if k, err := wire.PeekKind(cmd); err != nil || k != wire.KindCommand {
		t.Fatalf("test frame: kind %v, %v", k, err)
	}
	cl, tr := TraceClient(nopClient{frame: cmd})
	h := transport.Handler(func([]byte, transport.Peer) {})
	if a := testing.AllocsPerRun(1000, func() {
		_ = cl.Send(cmd)
		_ = cl.Flush()
		_, _ = cl.Poll(h, 0)
		tr.Take()
	}); a != 0 {
		t.Fatalf("traced client: %v allocs per frame, want 0", a)
	}
	_ = cl.Flush()
	hb, err := wire.AppendHeartbeat(make([]byte, 100), 1, 1, 1, 0, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = cl.Send(hb) // not a command: no send instant
	_ = cl.Flush()
	if out, _ := tr.Take(); out != 0 {
		t.Fatal("a frame other than a command noted as the command's send")
	}
	_ = cl.Send(cmd)
	_ = cl.Flush()
	_, _ = cl.Poll(h, 0)
	if out, in := tr.Take(); out == 0 || in == 0 || in < out {
		t.Fatalf("instants out=%d in=%d: want both, in order", out, in)
	}
	if out, in := tr.CPUs(); cpuid.Current() >= 0 && (out < 0 || in < 0) {
		t.Fatalf("CPUs out=%d in=%d: want both read", out, in)
	}
	srv := NewTracedServer(nopServer{})
	buf := make([]byte, 1500)
	var w wire.PacketWriter
	if err := w.Reset(buf, wire.KindData, 1, 1, 1, 1000, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Record{Time: 1000, Account: wire.MustAccount("A"), CmdSeq: 1, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	pkt := w.Bytes()
	if a := testing.AllocsPerRun(1000, func() {
		_ = srv.Publish(pkt)
		_ = srv.Flush()
	}); a != 0 {
		t.Fatalf("traced server: %v allocs per packet, want 0", a)
	}
}
