package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/test/check"
)

// bridgeReader is an in-process read-only node of one site: it notes,
// per seq, how long after its sequencer timestamp each message arrived
// (one host: the sequencer's wall clock is ours), and when the first and
// the last of a phase arrived.
type bridgeReader struct {
	mu          sync.Mutex // guards the rest (a bench, not a hot path)
	lat         []int64    // per seq - base, ns; 0: not yet
	base, top   uint64     // top: the highest seq seen
	n, want     int
	first, last time.Time
	done        chan struct{}
	// chk digests the whole stream, from seq 1, to compare the sites'.
	chk *check.Stream
}

func (r *bridgeReader) OnMessage(m *node.Message) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chk.Observe(m)
	r.top = max(r.top, m.Seq)
	if m.Internal() {
		return
	}
	if r.want == 0 || m.Seq < r.base || m.Seq-r.base >= uint64(len(r.lat)) {
		return
	}
	i := m.Seq - r.base
	if r.lat[i] != 0 {
		return
	}
	r.lat[i] = max(now.UnixNano()-m.Time, 1)
	if r.n == 0 {
		r.first = now
	}
	r.last = now
	if r.n++; r.n == r.want {
		close(r.done)
	}
}

// phase starts counting want messages from seq base on.
func (r *bridgeReader) phase(base uint64, want int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = make([]int64, want+want/4+64)
	r.base, r.n, r.want, r.done = base, 0, want, make(chan struct{})
}

func (r *bridgeReader) wait(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("bench: %d of %d messages in %v", r.n, r.want, d)
	}
}

func (r *bridgeReader) rate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.last.Sub(r.first).Seconds(); s > 0 {
		return float64(r.n-1) / s
	}
	return 0
}

// startReader runs a read-only node on the site whose groups net names.
func startReader(ctx context.Context, stream, command string) (*bridgeReader, error) {
	mc := multicast.DefaultConfig()
	mc.StreamGroup, mc.CommandGroup, mc.ReadBufferBytes = stream, command, 32<<20
	c, err := multicast.NewClient(mc)
	if err != nil {
		return nil, err
	}
	r := &bridgeReader{chk: check.New(check.Config{Digest: true})}
	cfg := node.DefaultConfig()
	cfg.ReadOnly, cfg.Rewind, cfg.RewindFrom = true, true, 1
	n, err := node.New(cfg, r, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	go func() {
		_ = n.Run(ctx)
		c.Close()
	}()
	return r, nil
}

// benchBridge is `seqd bench --mode bridge`: a sequencer and a sending
// node on site A, a bridge pair (one TCP and one UDP channel on
// loopback) to site B, and one read-only node per site in this process.
// A first phase at a moderate rate gives the added one-way latency of the
// bridge (per message: B's latency minus A's); a second at full speed
// gives B's delivery rate as a ratio of A's.
func benchBridge(ctx context.Context, o Config) error {
	netA, err := benchNet("udp")
	if err != nil {
		return err
	}
	netB, err := benchNet("udp")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "seqd-bench-bridge")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	addrs, err := freeport.Addrs(2)
	if err != nil {
		return err
	}
	set := newChildren(o.Exe)
	defer set.StopAll()
	seq, err := set.start(ctx, "sequencer", true, append([]string{"sequencer", "--session", strconv.FormatInt(time.Now().UnixNano(), 10)}, netA...)...)
	if err != nil {
		return err
	}
	if _, err := seq.WaitLine("sequencer: ready", 10*time.Second); err != nil {
		return err
	}
	send, err := set.start(ctx, "bridge-send", true, append([]string{"bridge", "--role", "send", "--site", "A", "--tcp", addrs[0], "--udp", addrs[1],
		"--dir", filepath.Join(dir, "send")}, netA...)...)
	if err != nil {
		return err
	}
	recvArgs := []string{"bridge", "--role", "receive", "--site", "B", "--tcp", addrs[0], "--udp", addrs[1], "--dir", filepath.Join(dir, "receive")}
	if o.Faults != "" {
		recvArgs = append(recvArgs, "--faults", o.Faults, "--faults-on", "udp")
	}
	recv, err := set.start(ctx, "bridge-receive", true, append(recvArgs, netB...)...)
	if err != nil {
		return err
	}
	for _, p := range []interface {
		WaitLine(string, time.Duration) (string, error)
	}{send, recv} {
		if _, err := p.WaitLine("bridge: ready", 10*time.Second); err != nil {
			return err
		}
	}
	ra, err := startReader(ctx, netA[3], netA[5])
	if err != nil {
		return err
	}
	rb, err := startReader(ctx, netB[3], netB[5])
	if err != nil {
		return err
	}
	sender := func(name string, count int, extra ...string) error {
		args := append(append([]string{"node"}, netA...), "--account", name, "--count", strconv.Itoa(count), "--size", strconv.Itoa(o.SizeBytes), "--node.window", "4096")
		if o.Batch {
			args = append(args, "--node.max-packet-bytes", "0")
		}
		p, err := set.start(ctx, name, false, append(args, extra...)...)
		if err != nil {
			return err
		}
		_, err = p.WaitLine("node: ok", 10*time.Minute)
		return err
	}
	// The stream begins with the sequencer's own records: a phase counts
	// want user messages from the seq after the highest one seen.
	next := func() uint64 {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		return ra.top + 1
	}
	latN := min(20000, max(o.Count/10, 1000))
	ra.phase(1, latN)
	rb.phase(1, latN)
	if err := sender("LAT", latN, "--rate", "10000"); err != nil {
		return err
	}
	if err := ra.wait(ctx, time.Minute); err != nil {
		return err
	}
	if err := rb.wait(ctx, time.Minute); err != nil {
		return fmt.Errorf("site B: %w", err)
	}
	var added, la, lb []int64
	ra.mu.Lock()
	rb.mu.Lock()
	for i := range ra.lat {
		if a, b := ra.lat[i], rb.lat[i]; a > 0 && b > 0 {
			added, la, lb = append(added, b-a), append(la, a), append(lb, b)
		}
	}
	rb.mu.Unlock()
	ra.mu.Unlock()
	sa, sb, sd := Summarize(la), Summarize(lb), Summarize(added)

	base := next()
	ra.phase(base, o.Count)
	rb.phase(base, o.Count)
	t0 := time.Now()
	if err := sender("TPUT", o.Count); err != nil {
		return err
	}
	if err := ra.wait(ctx, 5*time.Minute); err != nil {
		return err
	}
	if err := rb.wait(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("site B: %w", err)
	}
	// The far site's stream is the origin's: same last seq and digest
	// once quiet, nothing lost or repeated.
	equal := false
	var lastA, lastB, digA, digB, bad uint64
	for deadline := time.Now().Add(10 * time.Second); !equal && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ra.mu.Lock()
		rb.mu.Lock()
		lastA, lastB, digA, digB = ra.chk.Last, rb.chk.Last, ra.chk.Digest, rb.chk.Digest
		bad = ra.chk.Lost + ra.chk.Dup + rb.chk.Lost + rb.chk.Dup
		rb.mu.Unlock()
		ra.mu.Unlock()
		equal = lastA == lastB && digA == digB
	}
	if !equal || bad != 0 {
		return fmt.Errorf("bench: site B's stream (last %d, digest %016x) is not site A's (last %d, digest %016x), %d lost or repeated", lastB, digB, lastA, digA, bad)
	}
	faults := ""
	if o.Faults != "" {
		faults = " udp_faults=" + o.Faults
	}
	rateA, rateB := ra.rate(), rb.rate()
	ratio := 0.0
	if rateA > 0 {
		ratio = rateB / rateA
	}
	fmt.Fprintf(o.Out, "bench transport=udp mode=bridge size=%d msgs=%d lat_msgs=%d added_p50_us=%.1f added_p99_us=%.1f origin_p50_us=%.1f origin_p99_us=%.1f far_p50_us=%.1f far_p99_us=%.1f origin_rate=%.0f far_rate=%.0f ratio=%.3f streams_equal=true last_seq=%d elapsed_s=%.1f%s\n",
		o.SizeBytes, o.Count, sd.N, micros(sd.P50), micros(sd.P99), micros(sa.P50), micros(sa.P99), micros(sb.P50), micros(sb.P99), rateA, rateB, ratio, lastA, time.Since(t0).Seconds(), faults)
	return nil
}
