package page

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/config"
)

//go:embed index.html
var indexHTML []byte

// Config sets the page's refresh and bounds.
type Config struct {
	// RefreshInterval is how often the page is brought up to date (each
	// server-sent event, and the polling fallback).
	RefreshInterval time.Duration
	// GatherTimeout bounds one gathering (every member's status).
	GatherTimeout time.Duration
	// MaxElections is how many recent elections the page lists.
	MaxElections int
}

// DefaultConfig refreshes each second.
func DefaultConfig() Config {
	return Config{RefreshInterval: time.Second, GatherTimeout: 800 * time.Millisecond, MaxElections: 10}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.RefreshInterval < 50*time.Millisecond || c.RefreshInterval > time.Minute:
		return config.New(ErrConfig, "RefreshInterval", c.RefreshInterval, "50ms..1m")
	case c.GatherTimeout <= 0 || c.GatherTimeout > c.RefreshInterval*10:
		return config.New(ErrConfig, "GatherTimeout", c.GatherTimeout, ">0 and at most 10 RefreshIntervals")
	case c.MaxElections < 1 || c.MaxElections > 1000:
		return config.New(ErrConfig, "MaxElections", c.MaxElections, "1..1000")
	}
	return nil
}

// Handler serves the status page:
//
//	GET /             the page (one embedded file: no external assets)
//	GET /status.json  the Status now
//	GET /events       server-sent events: one Status each RefreshInterval
//
// Mount it under a prefix with http.StripPrefix. Every viewer shares one
// gathering per half refresh, so many open pages cost what one does.
type Handler struct {
	cfg Config
	src Source
	mux *http.ServeMux

	mu   sync.Mutex // guards hist, last, at; held across a gathering
	hist *History
	last Status
	at   time.Time
}

// New is the page over src.
func New(cfg Config, src Source) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, src: src, hist: NewHistory(cfg.MaxElections), mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /{$}", h.index)
	h.mux.HandleFunc("GET /status.json", h.statusJSON)
	h.mux.HandleFunc("GET /events", h.events)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Status is the deployment now: the last gathering when it is younger
// than half a refresh, else a new one.
func (h *Handler) Status(ctx context.Context) Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if !h.at.IsZero() && now.Sub(h.at) < h.cfg.RefreshInterval/2 {
		return h.last
	}
	gctx, cancel := context.WithTimeout(ctx, h.cfg.GatherTimeout)
	s := h.src.Gather(gctx)
	cancel()
	now = time.Now()
	s.AtNS = now.UnixNano()
	h.last, h.at = h.hist.Observe(now, s), now
	return h.last
}

func (h *Handler) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(indexHTML)
}

func (h *Handler) statusJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h.Status(r.Context()))
}

// events streams a Status each refresh until the viewer goes away or
// the server closes (both end r's context).
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	// A lost connection: the browser comes back after one refresh.
	fmt.Fprintf(w, "retry: %d\n\n", h.cfg.RefreshInterval.Milliseconds())
	t := time.NewTicker(h.cfg.RefreshInterval)
	defer t.Stop()
	for {
		b, err := json.Marshal(h.Status(r.Context()))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}
