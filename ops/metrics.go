package ops

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are read from a role's existing counters when Prometheus
// scrapes (a Collector takes one snapshot of a Stats struct per scrape),
// so serving /metrics adds nothing to any hot path. Names follow the
// Prometheus conventions: the seqd_ prefix, _total on counters, base
// units (seconds, bytes); docs/ops.md lists them all.

// Field is one metric read from a snapshot S: a counter or a gauge,
// with constant labels (a reason, a direction) telling apart fields that
// share a name.
type Field[S any] struct {
	Name    string
	Help    string
	Counter bool
	Labels  prometheus.Labels
	Get     func(*S) float64
}

// Counter and Gauge build Fields.
func Counter[S any](name, help string, get func(*S) float64) Field[S] {
	return Field[S]{Name: name, Help: help, Counter: true, Get: get}
}

// Gauge is a Field whose value goes up and down.
func Gauge[S any](name, help string, get func(*S) float64) Field[S] {
	return Field[S]{Name: name, Help: help, Get: get}
}

// With is f with constant labels kv (name, value, ...).
func (f Field[S]) With(kv ...string) Field[S] {
	f.Labels = prometheus.Labels{}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Labels[kv[i]] = kv[i+1]
	}
	return f
}

// SnapCollector is a prometheus.Collector that takes one snapshot per
// scrape (Snap, safe from any goroutine) and reports Fields from it.
type SnapCollector[S any] struct {
	snap   func() S
	fields []Field[S]
	descs  []*prometheus.Desc
	// extra, if set, reports metrics that are no plain field of S (a
	// label per state, a histogram fed at scrape time), from the same
	// snapshot.
	extra func(s *S, ch chan<- prometheus.Metric)
	xdesc []*prometheus.Desc
}

// NewSnapCollector collects fields of snap's snapshots.
func NewSnapCollector[S any](snap func() S, fields ...Field[S]) *SnapCollector[S] {
	c := &SnapCollector[S]{snap: snap, fields: fields}
	for _, f := range fields {
		c.descs = append(c.descs, prometheus.NewDesc(f.Name, f.Help, nil, f.Labels))
	}
	return c
}

// Describe sends every metric's description.
func (c *SnapCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, d := range c.xdesc {
		ch <- d
	}
}

// Collect takes one snapshot and sends every metric.
func (c *SnapCollector[S]) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	for i, f := range c.fields {
		t := prometheus.GaugeValue
		if f.Counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], t, f.Get(&s))
	}
	if c.extra != nil {
		c.extra(&s, ch)
	}
}

// u is a uint64 as a metric value.
func u(v uint64) float64 { return float64(v) }

// scrapeHistogram is a histogram fed at scrape time from a value a role
// keeps (the timing of its last epoch change): observed once per new
// key, so changes between two scrapes but the last are not seen (the
// count says how many were).
type scrapeHistogram struct {
	mu   sync.Mutex
	h    prometheus.Histogram
	last uint64
}

func newScrapeHistogram(name, help string, buckets []float64) *scrapeHistogram {
	return &scrapeHistogram{h: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})}
}

// observe records v under key once (key 0: nothing).
func (s *scrapeHistogram) observe(key uint64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != 0 && key != s.last {
		s.last = key
		s.h.Observe(v)
	}
}

// changeBuckets are the seconds of an epoch change: 1 ms to 10 s.
var changeBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 12)
