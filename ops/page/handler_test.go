package page

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestServer(t *testing.T, src Source) *httptest.Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RefreshInterval = 100 * time.Millisecond
	h, err := New(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", h))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// The page is one file: no script, style, image or font from elsewhere
// (it works offline).
func TestHandler_PageHasNoExternalAssets(t *testing.T) {
	ts := newTestServer(t, SourceFunc(func(context.Context) Status { return Status{} }))
	resp, body := get(t, ts.URL+"/ui/")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui/: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, re := range []string{`(src|href)\s*=\s*["']?(https?:)?//`, `@import`, `url\(`} {
		if m := regexp.MustCompile(re).FindString(body); m != "" {
			t.Errorf("the page loads something from elsewhere: %q", m)
		}
	}
	for _, id := range []string{`id="primary"`, `id="epoch"`, `id="stable"`, `id="members"`, `id="elections"`, `id="replayers"`, `id="pairs"`, `id="receivers"`} {
		if !strings.Contains(body, id) {
			t.Errorf("the page has no %s", id)
		}
	}
}

func TestHandler_StatusJSONAndEvents(t *testing.T) {
	var n atomic.Int64
	src := SourceFunc(func(context.Context) Status {
		k := uint64(n.Add(1))
		return Status{Source: "test", Primary: 2, Epoch: 5, Stable: 10 * k, Published: 10 * k}
	})
	ts := newTestServer(t, src)
	_, body := get(t, ts.URL+"/ui/status.json")
	var s Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("status.json: %v: %s", err, body)
	}
	if s.Primary != 2 || s.Epoch != 5 || s.Stable == 0 || s.AtNS == 0 {
		t.Fatalf("status.json: %+v", s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/ui/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var stables []uint64
	for len(stables) < 3 && sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e Status
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event: %v: %s", err, line)
		}
		stables = append(stables, e.Stable)
	}
	if len(stables) < 3 || !(stables[0] < stables[1] && stables[1] < stables[2]) {
		t.Fatalf("events' stable seqs %v: want three, rising (one gathering per refresh)", stables)
	}
}

func TestConfig_Validate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.RefreshInterval = time.Millisecond
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "RefreshInterval") {
		t.Fatalf("1ms refresh: %v", err)
	}
}
