package bench

import (
	"bufio"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSummarize_NearestRank(t *testing.T) {
	samples := make([]int64, 1000)
	for i := range samples {
		samples[i] = int64(i + 1)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })
	before := slices.Clone(samples)

	got := Summarize(samples)
	want := LatencySummary{N: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}
	if got != want {
		t.Errorf("Summarize(1..1000) = %+v, want %+v", got, want)
	}
	if !slices.Equal(samples, before) {
		t.Error("summarize reordered the caller's samples")
	}
}

func TestSummarize_SmallInputs(t *testing.T) {
	tests := []struct {
		name    string
		samples []int64
		want    LatencySummary
	}{
		{"empty", nil, LatencySummary{}},
		{"one", []int64{7}, LatencySummary{N: 1, P50: 7, P90: 7, P99: 7, P999: 7, Max: 7}},
		// Rank ceil(0.5*2) = 1: the lower of two, not their mean.
		{"two", []int64{20, 10}, LatencySummary{N: 2, P50: 10, P90: 20, P99: 20, P999: 20, Max: 20}},
		{"ten", []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, LatencySummary{N: 10, P50: 5, P90: 9, P99: 10, P999: 10, Max: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.samples); got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.samples, got, tt.want)
			}
		})
	}
}

func TestLatencySummary_Fields(t *testing.T) {
	s := LatencySummary{N: 3, P50: 12345 * time.Nanosecond, P90: 20 * time.Microsecond,
		P99: 99960 * time.Nanosecond, P999: 140 * time.Microsecond, Max: 2 * time.Millisecond}
	want := "p50_us=12.3 p90_us=20.0 p99_us=100.0 p999_us=140.0 max_us=2000.0"
	if got := s.Fields(); got != want {
		t.Errorf("Fields() = %q, want %q", got, want)
	}
}

func TestBucketIndex_EdgesBelongToTheBucketAbove(t *testing.T) {
	for i := 0; i < 60; i++ {
		edge := bucketEdge(i)
		if got := bucketIndex(edge); got != i {
			t.Errorf("bucketIndex(%v) = %d, want %d", edge, got, i)
		}
		if i > 0 {
			if got := bucketIndex(edge * (1 - 1e-9)); got != i-1 {
				t.Errorf("bucketIndex(just below %v) = %d, want %d", edge, got, i-1)
			}
		}
	}
	if got := bucketIndex(0); got != 0 {
		t.Errorf("bucketIndex(0) = %d, want 0", got)
	}
}

func TestWriteHistogram_CountsAndPlot(t *testing.T) {
	// A body near 16 µs and a long tail to ~10 ms, like a loopback round trip.
	r := rand.New(rand.NewPCG(3, 4))
	samples := make([]int64, 20000)
	for i := range samples {
		us := 14 + r.ExpFloat64()*3
		if i%100 == 0 {
			us = 50 + r.ExpFloat64()*500
		}
		samples[i] = int64(us * 1e3)
	}
	samples[0] = 10_000_000 // 10 ms
	dir := filepath.Join(t.TempDir(), "made", "by", "writeHistogram")

	csvPath, pngPath, err := writeHistogram(dir, "rtt", samples)
	if err != nil {
		t.Fatal(err)
	}

	lines := readLines(t, csvPath)
	if lines[0] != "bucket_us,count" {
		t.Fatalf("%s header = %q", csvPath, lines[0])
	}
	total, prev := 0, -1.0
	for _, l := range lines[1:] {
		edge, count, ok := strings.Cut(l, ",")
		if !ok {
			t.Fatalf("%s: line %q has no comma", csvPath, l)
		}
		us, err := strconv.ParseFloat(edge, 64)
		if err != nil || us <= prev {
			t.Fatalf("%s: bucket %q not a number above %v", csvPath, edge, prev)
		}
		if len(edge) > 6 {
			t.Errorf("%s: bucket label %q is not a short round number", csvPath, edge)
		}
		prev = us
		n, err := strconv.Atoi(count)
		if err != nil {
			t.Fatalf("%s: count %q: %v", csvPath, count, err)
		}
		total += n
	}
	if total != len(samples) {
		t.Errorf("bucket counts sum to %d, want %d", total, len(samples))
	}
	if first := lines[1]; !strings.HasPrefix(first, "14,") {
		t.Errorf("first bucket %q, want the one holding 14 µs: 14", first)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "10000,1") {
		t.Errorf("last bucket %q, want the one holding 10 ms alone: 10000,1", last)
	}

	raw := readLines(t, filepath.Join(dir, "rtt_samples.csv"))
	if raw[0] != "rtt_us" || len(raw) != len(samples)+1 {
		t.Fatalf("rtt_samples.csv: header %q and %d lines, want rtt_us and %d", raw[0], len(raw), len(samples)+1)
	}
	if raw[1] != "10000.000" {
		t.Errorf("rtt_samples.csv first sample %q, want 10000.000", raw[1])
	}

	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", pngPath, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("%s is %v, want a real plot", pngPath, b)
	}
}

func TestWriteHistogram_FewSamples(t *testing.T) {
	tests := []struct {
		name    string
		samples []int64
		want    []string
	}{
		{"none", nil, []string{"bucket_us,count"}},
		{"one", []int64{16_000}, []string{"bucket_us,count", "16,1"}},
		{"same", []int64{100, 100, 100}, []string{"bucket_us,count", "0.1,3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			csvPath, pngPath, err := writeHistogram(dir, tt.name, tt.samples)
			if err != nil {
				t.Fatal(err)
			}
			if lines := readLines(t, csvPath); !slices.Equal(lines, tt.want) {
				t.Errorf("%s = %q, want %q", csvPath, lines, tt.want)
			}
			f, err := os.Open(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := png.Decode(f); err != nil {
				t.Errorf("%s: %v", pngPath, err)
			}
		})
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return lines
}
