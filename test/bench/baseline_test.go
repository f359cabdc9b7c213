package bench

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/cpuid"
	"github.com/seqd/seqd/test/proc"
)

// benchPeerEnv makes the test binary act as `seqd bench-peer`: the baseline
// needs a second process, and the seqd binary is not built by tests.
const benchPeerEnv = "SEQD_BENCH_PEER"

func TestMain(m *testing.M) {
	if os.Getenv(benchPeerEnv) != "" {
		// os.Args: the test binary, "bench-peer", then seqd bench-peer's flags.
		cfg := DefaultPeerConfig()
		fs := flag.NewFlagSet("bench-peer", flag.ExitOnError)
		fs.StringVar(&cfg.Role, "role", cfg.Role, "echo | sink")
		fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "UDP address to listen on")
		fs.IntVar(&cfg.SizeBytes, "size", cfg.SizeBytes, "bytes per message")
		_ = fs.Parse(os.Args[2:])
		if err := RunPeer(cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testPeerCommand re-executes the test binary as the peer.
func testPeerCommand(args ...string) proc.Spec {
	return proc.Spec{Path: os.Args[0], Args: append([]string{"bench-peer"}, args...), Env: []string{benchPeerEnv + "=1"}}
}

var baselineLine = regexp.MustCompile(`^bench transport=udp mode=baseline size=(\d+) udp_rtt_p50_us=([0-9.]+) udp_rtt_p999_us=([0-9.]+)(?: udp_rtt_hops_cross_cpu_pct=(\d+))? udp_blast_rate=(\d+) msg/s\n$`)

func TestRunBaseline_PrintsOneLine(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The histogram files once: plotting is slow under -race.
			dir := ""
			if batch {
				dir = t.TempDir()
			}
			var out strings.Builder
			err := runBaselineWith(ctx, baselineOptions{size: 256, count: 2000, batch: batch, outDir: dir}, testPeerCommand, &out)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(strings.TrimSpace(out.String()))
			m := baselineLine.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("output %q does not match %v", out.String(), baselineLine)
			}
			if m[1] != "256" {
				t.Errorf("size=%s, want 256", m[1])
			}
			p50, _ := strconv.ParseFloat(m[2], 64)
			p999, _ := strconv.ParseFloat(m[3], 64)
			rate, _ := strconv.ParseFloat(m[5], 64)
			if cross := m[4]; cpuid.Current() >= 0 {
				if pct, err := strconv.Atoi(cross); err != nil || pct < 0 || pct > 100 {
					t.Errorf("udp_rtt_hops_cross_cpu_pct=%q: want a share 0..100 where CPUs can be read", cross)
				}
			}
			if p50 <= 0 || p999 < p50 || rate <= 0 {
				t.Errorf("p50 %v µs, p99.9 %v µs, rate %v msg/s: want 0 < p50 <= p99.9 and a positive rate", p50, p999, rate)
			}
			if dir == "" {
				return
			}
			lines := readLines(t, filepath.Join(dir, "baseline_rtt_samples.csv"))
			if len(lines) != 2001 {
				t.Errorf("baseline_rtt_samples.csv has %d samples, want 2000", len(lines)-1)
			}
		})
	}
}

func TestRunBaseline_BadOptions(t *testing.T) {
	tests := []struct {
		o    baselineOptions
		want string
	}{
		{baselineOptions{size: 0, count: 10}, "--size 0 out of range (1..65507)"},
		{baselineOptions{size: 70000, count: 10}, "--size 70000 out of range (1..65507)"},
		{baselineOptions{size: 256, count: 0}, "--count 0 must be at least 1"},
	}
	for _, tt := range tests {
		err := runBaselineWith(context.Background(), tt.o, testPeerCommand, new(strings.Builder))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("runBaselineWith(%+v) = %v, want an error containing %q", tt.o, err, tt.want)
		}
	}
}

// A peer that cannot start must fail the run with the peer's own error,
// not hang or leave a process behind.
func TestStartPeer_FailingPeer(t *testing.T) {
	ctx := context.Background()
	_, err := startPeer(ctx, testPeerCommand, "--role", "mirror")
	if err == nil || !strings.Contains(err.Error(), `--role "mirror" (want echo or sink)`) {
		t.Errorf("startPeer(--role mirror) = %v, want the peer's role error", err)
	}
	_, err = startPeer(ctx, testPeerCommand, "--role", "echo", "--addr", "not-an-address")
	if err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Errorf("startPeer(--addr not-an-address) = %v, want the peer's address error", err)
	}
}

func TestBlastReport_RoundTrip(t *testing.T) {
	want := blastReport{msgs: 1_000_000, datagrams: 200_000, firstMsgs: 5, interval: 987654321}
	got, err := parseBlastReport(want.String())
	if err != nil || got != want {
		t.Errorf("parseBlastReport(%q) = %+v, %v; want %+v", want.String(), got, err, want)
	}
	if _, err := parseBlastReport("msgs=x"); err == nil {
		t.Error("parseBlastReport(msgs=x) = nil error")
	}
}

// echoPair starts the echo peer's loop on a loopback socket and returns
// a socket to ping it from (reads time out after 30 s) and its address;
// both close when the test ends.
func echoPair(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	echo, err := listenLoopbackUDP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go serveEcho(echo)
	conn, err := listenLoopbackUDP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return conn, echo.LocalAddr().(*net.UDPAddr).AddrPort()
}

// The echo peer says which CPU each ping arrived on, past the ping's tag.
func TestServeEcho_SaysWhichCPU(t *testing.T) {
	if cpuid.Current() < 0 {
		t.Skip("CPU not readable here")
	}
	conn, to := echoPair(t)
	ping := []byte("tag-0001\x00\x00rest")
	if _, err := conn.WriteToUDPAddrPort(ping, to); err != nil {
		t.Fatal(err)
	}
	pong := make([]byte, 64)
	n, _, _, _, err := conn.ReadMsgUDPAddrPort(pong, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ping) || string(pong[:echoCPUAt]) != "tag-0001" || string(pong[echoCPUAt+2:n]) != "rest" {
		t.Fatalf("reply %q: want the ping with only bytes 8-9 changed", pong[:n])
	}
	if cpu := int(binary.LittleEndian.Uint16(pong[echoCPUAt:])) - 1; cpu < 0 {
		t.Fatalf("reply names CPU %d, want a CPU", cpu)
	}
}

// The echo loop and the round-trip loop are the measurement: they must not
// allocate, or the baseline would include the garbage collector.
func TestEchoRoundTrip_NoAllocs(t *testing.T) {
	conn, to := echoPair(t)
	ping, pong := make([]byte, 256), make([]byte, 2048)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := conn.WriteToUDPAddrPort(ping, to); err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := conn.ReadMsgUDPAddrPort(pong, nil); err != nil {
			t.Fatal(err)
		}
		_ = time.Now()
	})
	if allocs != 0 {
		t.Errorf("a round trip allocates %v times, want 0", allocs)
	}
}
