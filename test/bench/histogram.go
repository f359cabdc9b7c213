package bench

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// LatencySummary holds the percentiles of round-trip samples, so that every
// bench mode reports its latency the same way.
type LatencySummary struct {
	N                        int
	P50, P90, P99, P999, Max time.Duration
}

// Summarize sorts a copy of samples (nanoseconds; the caller keeps its
// order) and takes nearest-rank percentiles: the value at rank
// ceil(q*N), so every reported figure is a sample that was really seen.
// Empty input gives the zero summary.
func Summarize(samples []int64) LatencySummary {
	if len(samples) == 0 {
		return LatencySummary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	n := len(sorted)
	// q in parts per ten thousand keeps the rank exact: with float
	// arithmetic 0.999*1000 may round to 999.0000001 and pick rank 1000.
	at := func(q int) time.Duration {
		rank := (n*q + 9999) / 10000
		if rank < 1 {
			rank = 1
		}
		return time.Duration(sorted[rank-1])
	}
	return LatencySummary{
		N:    n,
		P50:  at(5000),
		P90:  at(9000),
		P99:  at(9900),
		P999: at(9990),
		Max:  time.Duration(sorted[n-1]),
	}
}

// Fields renders the summary as key=value fields in microseconds with one
// decimal, the unit the bench lines use.
func (s LatencySummary) Fields() string {
	return fmt.Sprintf("p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f",
		micros(s.P50), micros(s.P90), micros(s.P99), micros(s.P999), micros(s.Max))
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// renard20 is the R20 preferred-number series: twenty steps per decade,
// each about 12% wider than the last, with short round labels (1.12, 1.25,
// 1.4, 1.6, ...). Round trips span 5 µs to 10 ms, so log-spaced buckets
// keep both the body and the tail readable in one table of some seventy
// lines. Kept in hundredths so that edges are computed from integers and
// print as 3.15, not 3.1500000000000004.
var renard20 = [...]int64{100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
	315, 355, 400, 450, 500, 560, 630, 710, 800, 900}

// latencyBucket is one histogram bucket: [LowUS, HighUS) microseconds.
type latencyBucket struct {
	LowUS, HighUS float64
	Count         int
}

// minBucketUS is the lower edge of the lowest possible bucket; faster
// samples (not expected from a real round trip) are counted in it.
const minBucketUS = 0.1

// latencyBuckets counts samples (nanoseconds) in R20 buckets from the one
// holding the fastest sample to the one holding the slowest, empty
// buckets in between included, so the counts always sum to len(samples).
func latencyBuckets(samples []int64) []latencyBucket {
	if len(samples) == 0 {
		return nil
	}
	lo, hi := slices.Min(samples), slices.Max(samples)
	lowest := bucketIndex(float64(lo) / 1e3)
	highest := bucketIndex(float64(hi) / 1e3)
	buckets := make([]latencyBucket, highest-lowest+1)
	for i := range buckets {
		buckets[i].LowUS = bucketEdge(lowest + i)
		buckets[i].HighUS = bucketEdge(lowest + i + 1)
	}
	for _, ns := range samples {
		buckets[bucketIndex(float64(ns)/1e3)-lowest].Count++
	}
	return buckets
}

// bucketIndex numbers the R20 buckets from minBucketUS upwards: bucket i
// is [bucketEdge(i), bucketEdge(i+1)).
func bucketIndex(us float64) int {
	if us <= minBucketUS {
		return 0
	}
	i := int(math.Floor(float64(len(renard20)) * math.Log10(us/minBucketUS)))
	// Log10 of an exact edge may land a hair below it; the edges are the
	// rounded series, so settle against them.
	for i > 0 && us < bucketEdge(i) {
		i--
	}
	for us >= bucketEdge(i+1) {
		i++
	}
	return i
}

func bucketEdge(i int) float64 {
	// renard20 is in hundredths and minBucketUS a tenth; the product of
	// the integer and an exact power of ten is exact, so the one rounding
	// is the division, which gives the shortest decimal.
	n := len(renard20)
	return float64(renard20[i%n]) * math.Pow10(i/n) / 1000
}

// writeHistogram writes three files into dir (created if needed):
// name.csv with the R20 buckets ("bucket_us,count", bucket_us being the
// lower edge), name_samples.csv with every sample in µs ("rtt_us") for
// anyone who wants other buckets, and name.png, a plot of the buckets on
// a log axis with the p50, p99 and p99.9 marked.
func writeHistogram(dir, name string, samples []int64) (csvPath, pngPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	buckets := latencyBuckets(samples)
	csvPath = filepath.Join(dir, name+".csv")
	err = writeLines(csvPath, "bucket_us,count", len(buckets), func(b []byte, i int) []byte {
		b = strconv.AppendFloat(b, buckets[i].LowUS, 'f', -1, 64)
		b = append(b, ',')
		return strconv.AppendInt(b, int64(buckets[i].Count), 10)
	})
	if err != nil {
		return "", "", err
	}
	err = writeLines(filepath.Join(dir, name+"_samples.csv"), "rtt_us", len(samples), func(b []byte, i int) []byte {
		return strconv.AppendFloat(b, float64(samples[i])/1e3, 'f', 3, 64)
	})
	if err != nil {
		return "", "", err
	}
	pngPath = filepath.Join(dir, name+".png")
	if err := plotHistogram(pngPath, name, buckets, Summarize(samples)); err != nil {
		return "", "", err
	}
	return csvPath, pngPath, nil
}

// writeLines writes a header and n lines made by line, and reports the
// first write or close error: a full disk must not pass silently.
func writeLines(path, header string, n int, line func(b []byte, i int) []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString(header)
	w.WriteByte('\n')
	var b []byte
	for i := 0; i < n; i++ {
		b = append(line(b[:0], i), '\n')
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func plotHistogram(path, name string, buckets []latencyBucket, s LatencySummary) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %d round trips", name, s.N)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "round trip (µs)"
	p.Y.Label.Text = "count"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(logTicks125)
	// Counts on a log axis too: the tail that decides p99.9 is a few dozen
	// samples beside a body of a hundred thousand.
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true

	hist := &plotter.Histogram{FillColor: color.Gray{Y: 170}, LineStyle: plotter.DefaultLineStyle, LogY: true}
	maxCount := 1
	for _, b := range buckets {
		hist.Bins = append(hist.Bins, plotter.HistogramBin{Min: b.LowUS, Max: b.HighUS, Weight: float64(b.Count)})
		maxCount = max(maxCount, b.Count)
	}
	hist.LineStyle.Width = vg.Points(0.5)
	if len(hist.Bins) == 0 {
		// No samples: an empty frame with the labels still tells the reader
		// what was (not) measured, and LogScale needs a positive range.
		hist.Bins = []plotter.HistogramBin{{Min: 1, Max: 10, Weight: 1}}
	}
	p.Add(hist)
	// Fixed y range: a bucket of one sample stays visible, and a single
	// bucket (or none) still gives the log axis a range above zero.
	p.Y.Min, p.Y.Max = 0.5, 2*float64(maxCount)

	marks := []struct {
		label string
		at    time.Duration
		color color.Color
	}{
		{"p50", s.P50, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"p99", s.P99, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"p99.9", s.P999, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	}
	for _, m := range marks {
		if s.N == 0 {
			break
		}
		x := micros(m.at)
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0.5}, {X: x, Y: float64(maxCount)}})
		if err != nil {
			return err
		}
		line.Color = m.color
		line.Width = vg.Points(1.5)
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s %.1f µs", m.label, x), line)
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

// logTicks125 labels 1, 2 and 5 times each power of ten and puts minor
// ticks at the other integers: plot.LogTicks labels only the powers of
// ten, which leaves a 10 µs .. 300 µs axis with two numbers on it.
func logTicks125(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
