package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/cpuid"
	"github.com/seqd/seqd/test/proc"
)

// The baseline measures what this machine does with no seqd protocol at
// all: plain UDP between two processes on loopback. Every seqd figure is
// meant to be read as a ratio of these.

const (
	// maxDatagramBytes is what fits in one Ethernet frame (1500 - 20 IPv4
	// - 8 UDP), the batch size seqd itself aims for.
	maxDatagramBytes = 1472
	// maxUDPPayloadBytes is the largest IPv4 UDP payload.
	maxUDPPayloadBytes = 65507

	baselineMaxRTTSamples = 200_000
	baselineWarmupRTTs    = 1000
	// baselineBlastTime bounds the blast when --count would take longer.
	baselineBlastTime = 2 * time.Second
	// socketBufferBytes is asked for on every socket; Linux caps it at
	// net.core.rmem_max / wmem_max.
	socketBufferBytes = 8 << 20

	// rttReplyTimeout is how long a ping waits before it counts as lost.
	rttReplyTimeout = time.Second
	// rttMaxLost stops the run when loopback loses more than a handful of
	// pings: something is wrong with the peer, not with the network.
	rttMaxLost = 20
	// peerStartTimeout bounds the wait for a peer to print its address.
	peerStartTimeout = 10 * time.Second
	// blastReportTimeout bounds the wait for the sink's report.
	blastReportTimeout = 5 * time.Second
)

// peerCommandFunc makes the spec of the child that runs `seqd bench-peer
// args...`. Tests substitute one that re-executes the test binary.
type peerCommandFunc func(args ...string) proc.Spec

// runBaseline prints exactly one line:
//
//	bench transport=udp mode=baseline size=S udp_rtt_p50_us=.. udp_rtt_p999_us=.. udp_blast_rate=R msg/s
//
// and, when o.OutDir is not empty, the round-trip histogram files made by
// writeHistogram(o.OutDir, "baseline_rtt", ...).
func runBaseline(ctx context.Context, o Config) error {
	return runBaselineWith(ctx, baselineOptions{size: o.SizeBytes, count: o.Count, batch: o.Batch, outDir: o.OutDir}, peerCommandOf(o.Exe), o.Out)
}

// peerCommandOf runs exe, the seqd binary, as the peer.
func peerCommandOf(exe string) peerCommandFunc {
	return func(args ...string) proc.Spec {
		return proc.Spec{Path: exe, Args: append([]string{"bench-peer"}, args...)}
	}
}

type baselineOptions struct {
	size, count int
	batch       bool
	outDir      string
}

func runBaselineWith(ctx context.Context, o baselineOptions, peerCommand peerCommandFunc, out io.Writer) error {
	switch {
	case o.size < 1 || o.size > maxUDPPayloadBytes:
		return fmt.Errorf("bench baseline: --size %d out of range (1..%d)", o.size, maxUDPPayloadBytes)
	case o.count < 1:
		return fmt.Errorf("bench baseline: --count %d must be at least 1", o.count)
	}
	samples, hops, err := baselineRTT(ctx, o.size, min(o.count, baselineMaxRTTSamples), peerCommand)
	if err != nil {
		return fmt.Errorf("bench baseline: round trip: %w", err)
	}
	rate, err := baselineBlast(ctx, o.size, o.count, o.batch, peerCommand)
	if err != nil {
		return fmt.Errorf("bench baseline: blast: %w", err)
	}
	if o.outDir != "" {
		if _, _, err := writeHistogram(o.outDir, "baseline_rtt", samples); err != nil {
			return fmt.Errorf("bench baseline: %w", err)
		}
	}
	s := Summarize(samples)
	cross := ""
	if hops.known > 0 {
		cross = fmt.Sprintf(" udp_rtt_hops_cross_cpu_pct=%.0f", 100*float64(hops.cross)/float64(hops.known))
	}
	_, err = fmt.Fprintf(out, "bench transport=udp mode=baseline size=%d udp_rtt_p50_us=%.1f udp_rtt_p999_us=%.1f%s udp_blast_rate=%.0f msg/s\n",
		o.size, micros(s.P50), micros(s.P999), cross, rate)
	return err
}

// hopCPUs counts the hops of the measured round trips whose CPUs were
// read at both ends (known) and those that woke the receiver on another
// CPU than the sender's (cross), as seqd's rtt bench does
// (net_hops_cross_cpu_pct): the ping's CPU before it sends and after it
// reads, the echo's when it read (it writes that CPU, plus one, into
// bytes 8 and 9 of its reply; 0 means unknown).
type hopCPUs struct{ known, cross int }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// echoCPUAt is where the echo peer writes its CPU in a reply of at least
// echoCPUAt+2 bytes (after the ping's tag).
const echoCPUAt = 8

// baselineRTT ping-pongs size-byte datagrams with an echo peer and returns
// n round trips in nanoseconds, after a warm-up that is thrown away (page
// faults, scheduler placement, the peer's first reads).
func baselineRTT(ctx context.Context, size, n int, peerCommand peerCommandFunc) (_ []int64, hops hopCPUs, err error) {
	peer, err := startPeer(ctx, peerCommand, "--role", "echo", "--size", fmt.Sprint(size))
	if err != nil {
		return nil, hops, err
	}
	defer peer.stopInto(&err)
	conn, err := listenLoopbackUDP()
	if err != nil {
		return nil, hops, err
	}
	defer conn.Close()

	ping := make([]byte, size)
	pong := make([]byte, maxUDPPayloadBytes)
	// Each ping carries its number in its first bytes (as many as fit) so
	// that a late reply to a ping given up as lost is not taken for the
	// reply to the next one.
	tag := ping[:min(size, 8)]
	var tagBuf [8]byte
	samples := make([]int64, 0, n)
	lost := 0
	var deadlineSetAt time.Time
	for seq := uint64(1); len(samples) < n; seq++ {
		if seq%1024 == 0 && ctx.Err() != nil {
			return nil, hops, ctx.Err()
		}
		binary.LittleEndian.PutUint64(tagBuf[:], seq)
		copy(tag, tagBuf[:])
		start := time.Now()
		outCPU := cpuid.Current()
		// Moving the deadline costs a timer update; once per 100 ms is
		// enough to give every ping at least rttReplyTimeout-100ms.
		if start.Sub(deadlineSetAt) > 100*time.Millisecond {
			if err := conn.SetReadDeadline(start.Add(rttReplyTimeout)); err != nil {
				return nil, hops, err
			}
			deadlineSetAt = start
		}
		if _, err := conn.WriteToUDPAddrPort(ping, peer.addr); err != nil {
			return nil, hops, err
		}
		for {
			m, _, _, _, err := conn.ReadMsgUDPAddrPort(pong, nil)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					return nil, hops, err
				}
				if lost++; lost > rttMaxLost {
					return nil, hops, fmt.Errorf("%d pings without a reply", lost)
				}
				deadlineSetAt = time.Time{}
				break
			}
			if m == size && bytes.Equal(pong[:len(tag)], tag) {
				if seq > baselineWarmupRTTs {
					samples = append(samples, int64(time.Since(start)))
					if in := cpuid.Current(); in >= 0 && outCPU >= 0 && size >= echoCPUAt+2 {
						if at := int(binary.LittleEndian.Uint16(pong[echoCPUAt:])) - 1; at >= 0 {
							hops.known += 2
							hops.cross += b2i(outCPU != at) + b2i(at != in)
						}
					}
				}
				break
			}
		}
	}
	return samples, hops, nil
}

// baselineBlast sends count size-byte messages (or as many as go in
// baselineBlastTime) to a sink peer as fast as one goroutine can, several
// per datagram when batch is set, and returns the messages per second the
// sink received between its first and last arrival. Datagrams the sink's
// socket has no room for are dropped by the kernel; that is the point of a
// blast: the rate counts what arrived, which is what a receiver can take.
func baselineBlast(ctx context.Context, size, count int, batch bool, peerCommand peerCommandFunc) (_ float64, err error) {
	peer, err := startPeer(ctx, peerCommand, "--role", "sink", "--size", fmt.Sprint(size))
	if err != nil {
		return 0, err
	}
	defer peer.stopInto(&err)
	conn, err := listenLoopbackUDP()
	if err != nil {
		return 0, err
	}
	defer conn.Close()

	perDatagram := 1
	if batch {
		perDatagram = max(1, maxDatagramBytes/size)
	}
	datagram := make([]byte, perDatagram*size)
	deadline := time.Now().Add(baselineBlastTime)
	for sent, i := 0, 0; sent < count; i++ {
		k := min(perDatagram, count-sent)
		if _, err := conn.WriteToUDPAddrPort(datagram[:k*size], peer.addr); err != nil {
			return 0, err
		}
		sent += k
		if i%256 == 255 {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if time.Now().After(deadline) {
				break
			}
		}
	}
	r, err := askBlastReport(ctx, conn, peer.addr)
	if err != nil {
		return 0, err
	}
	if r.interval <= 0 || r.msgs <= r.firstMsgs {
		return 0, fmt.Errorf("sink received %d messages in %d datagrams: too few to time", r.msgs, r.datagrams)
	}
	// The first datagram opens the interval, so its messages are not in it.
	return float64(r.msgs-r.firstMsgs) / r.interval.Seconds(), nil
}

// blastReport is what the sink saw: msgs in datagrams, the first of which
// held firstMsgs, over interval from the first arrival to the last.
type blastReport struct {
	msgs, datagrams, firstMsgs int64
	interval                   time.Duration
}

func (r blastReport) String() string {
	return fmt.Sprintf("msgs=%d datagrams=%d first_msgs=%d interval_ns=%d", r.msgs, r.datagrams, r.firstMsgs, r.interval.Nanoseconds())
}

func parseBlastReport(s string) (blastReport, error) {
	var r blastReport
	var ns int64
	if _, err := fmt.Sscanf(s, "msgs=%d datagrams=%d first_msgs=%d interval_ns=%d", &r.msgs, &r.datagrams, &r.firstMsgs, &ns); err != nil {
		return blastReport{}, fmt.Errorf("sink report %q: %w", s, err)
	}
	r.interval = time.Duration(ns)
	return r, nil
}

// askBlastReport sends the sink empty datagrams, its end-of-blast mark,
// until it answers with its report. The mark queues behind the data in the
// sink's socket, so the sink has read every datagram that arrived before it
// answers; the mark itself may be dropped when that socket is full, hence
// the repeats.
func askBlastReport(ctx context.Context, conn *net.UDPConn, sink netip.AddrPort) (blastReport, error) {
	buf := make([]byte, 512)
	giveUp := time.Now().Add(blastReportTimeout)
	for time.Now().Before(giveUp) {
		if err := ctx.Err(); err != nil {
			return blastReport{}, err
		}
		if _, err := conn.WriteToUDPAddrPort(nil, sink); err != nil {
			return blastReport{}, err
		}
		if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			return blastReport{}, err
		}
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return blastReport{}, err
		}
		if from == sink {
			return parseBlastReport(string(buf[:n]))
		}
	}
	return blastReport{}, fmt.Errorf("no report from the sink in %v", blastReportTimeout)
}

func listenLoopbackUDP() (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	// Best effort: the kernel caps the sizes silently, and a smaller buffer
	// only means more drops in the blast.
	_ = conn.SetReadBuffer(socketBufferBytes)
	_ = conn.SetWriteBuffer(socketBufferBytes)
	return conn, nil
}

// peerProcess is a running bench-peer child (under test/proc, as the
// bench's other children) and the address it listens on.
type peerProcess struct {
	*proc.Proc
	set  *proc.Set
	addr netip.AddrPort
}

// startPeer starts the peer and waits for the address it prints. On any
// error the child has been stopped already.
func startPeer(ctx context.Context, peerCommand peerCommandFunc, args ...string) (*peerProcess, error) {
	spec := peerCommand(args...)
	spec.Name = fmt.Sprintf("peer %v", args)
	// It runs until stopped, and exits when its stdin closes: when we
	// stop it, and also when this process dies without stopping it,
	// since the kernel closes the pipe.
	spec.MustRun = true
	spec.Stdin = true
	set := proc.NewSet("")
	child, err := set.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start peer %v: %w", args, err)
	}
	p := &peerProcess{Proc: child, set: set}
	got, err := p.WaitLine("listening ", peerStartTimeout)
	if err != nil {
		// The error says how the peer died, with its stderr.
		p.Kill()
		return nil, err
	}
	if p.addr, err = netip.ParseAddrPort(strings.TrimPrefix(got, "listening ")); err != nil {
		err = fmt.Errorf("peer %v printed %q, want \"listening <addr:port>\"", args, got)
		if stopErr := p.stop(); stopErr != nil {
			err = fmt.Errorf("%w (%v)", err, stopErr)
		}
		return nil, err
	}
	return p, nil
}

// stop ends the child (it keeps nothing worth a graceful end: a socket)
// and returns its failure, with what it wrote on stderr, if it died on
// its own before.
func (p *peerProcess) stop() error {
	select {
	case <-p.Exited():
		if p.set.Dead() != nil {
			return p.Failure()
		}
		return nil
	default:
	}
	p.Kill()
	return nil
}

// stopInto stops the peer and reports its failure in *err unless *err
// already holds the error that ended the run.
func (p *peerProcess) stopInto(err *error) {
	if stopErr := p.stop(); *err == nil {
		*err = stopErr
	}
}

// PeerConfig is the child side of the baseline (`seqd bench-peer`, run
// only by the bench): a UDP socket on loopback that echoes or sinks.
type PeerConfig struct {
	// Role is echo (send every datagram back) or sink (count them).
	Role string
	// Addr is the UDP address to listen on.
	Addr string
	// SizeBytes is the bytes per message: the sink counts datagram bytes
	// divided by it.
	SizeBytes int
}

// DefaultPeerConfig is `seqd bench-peer` with no flags but --role.
func DefaultPeerConfig() PeerConfig {
	return PeerConfig{Addr: "127.0.0.1:0", SizeBytes: 256}
}

// RunPeer listens on cfg.Addr, prints "listening <addr:port>" on stdout,
// and serves cfg.Role until stdin reaches EOF (the bench closes it, or
// the kernel does when the bench dies).
func RunPeer(cfg PeerConfig, stdin io.Reader, stdout io.Writer) error {
	return runBenchPeer(cfg.Role, cfg.Addr, cfg.SizeBytes, stdin, stdout)
}

// runBenchPeer listens on addr, prints "listening <addr:port>" on stdout,
// and serves its role until stdin reaches EOF.
func runBenchPeer(role, addr string, size int, stdin io.Reader, stdout io.Writer) error {
	if role != "echo" && role != "sink" {
		return fmt.Errorf("bench-peer: --role %q (want echo or sink)", role)
	}
	if size < 1 || size > maxUDPPayloadBytes {
		return fmt.Errorf("bench-peer: --size %d out of range (1..%d)", size, maxUDPPayloadBytes)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("bench-peer: --addr: %w", err)
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return fmt.Errorf("bench-peer: %w", err)
	}
	_ = conn.SetReadBuffer(socketBufferBytes)
	_ = conn.SetWriteBuffer(socketBufferBytes)
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		conn.Close()
	}()
	if _, err := fmt.Fprintf(stdout, "listening %s\n", conn.LocalAddr()); err != nil {
		conn.Close()
		return err
	}
	if role == "echo" {
		err = serveEcho(conn)
	} else {
		err = serveSink(conn, size)
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("bench-peer %s: %w", role, err)
}

// tagArrivalCPU says, in a datagram of n bytes in buf, which CPU it
// arrived on (see hopCPUs): in bytes echoCPUAt and echoCPUAt+1, past the
// tag, so the ping still knows its reply.
func tagArrivalCPU(buf []byte, n int) {
	if cpu := cpuid.Current(); cpu >= 0 && n >= echoCPUAt+2 {
		binary.LittleEndian.PutUint16(buf[echoCPUAt:], uint16(cpu+1))
	}
}

// serveEcho sends every datagram back where it came from, with the CPU it
// read it on in bytes 8 and 9 (see hopCPUs).
func serveEcho(conn *net.UDPConn) error {
	buf := make([]byte, maxUDPPayloadBytes)
	for {
		n, _, _, from, err := conn.ReadMsgUDPAddrPort(buf, nil)
		if err != nil {
			return err
		}
		tagArrivalCPU(buf, n)
		if _, err := conn.WriteToUDPAddrPort(buf[:n], from); err != nil {
			return err
		}
	}
}

// serveSink counts the messages (datagram bytes / size) that arrive, and
// answers each empty datagram, the end-of-blast mark, with its counts so
// far. Only the data datagrams move the interval.
func serveSink(conn *net.UDPConn, size int) error {
	buf := make([]byte, maxUDPPayloadBytes)
	var r blastReport
	var first time.Time
	for {
		n, _, _, from, err := conn.ReadMsgUDPAddrPort(buf, nil)
		if err != nil {
			return err
		}
		tagArrivalCPU(buf, n)
		if n == 0 {
			if _, err := conn.WriteToUDPAddrPort([]byte(r.String()), from); err != nil {
				return err
			}
			continue
		}
		now := time.Now()
		msgs := int64(max(1, n/size))
		if r.datagrams == 0 {
			first = now
			r.firstMsgs = msgs
		}
		r.datagrams++
		r.msgs += msgs
		r.interval = now.Sub(first)
	}
}
