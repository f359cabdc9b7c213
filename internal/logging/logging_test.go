package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestNew_FormatsAndLevels(t *testing.T) {
	var b bytes.Buffer
	l, err := New(&b, "json", slog.LevelWarn)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("dropped")
	l.Warn("kept", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("json format wrote %q: %v", b.String(), err)
	}
	if rec["msg"] != "kept" || rec["level"] != "WARN" || rec["k"] != float64(1) {
		t.Fatalf("record %v", rec)
	}
	if _, err := New(&b, "xml", slog.LevelInfo); err == nil || !strings.Contains(err.Error(), "text, json") {
		t.Fatalf("format xml: %v", err)
	}
	if _, err := ParseLevel("loud"); err == nil || !strings.Contains(err.Error(), "debug, info, warn, error") {
		t.Fatalf("level loud: %v", err)
	}
	if lv, err := ParseLevel("WARN"); err != nil || lv != slog.LevelWarn {
		t.Fatalf("WARN: %v %v", lv, err)
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestLimiter_OnePerKeyPerIntervalWithSuppressedCount(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(10*time.Second, c.now)
	logged := 0
	for i := 0; i < 71; i++ { // a dead peer's 71 lines in 10 s
		if ok, _ := l.Allow("peer 3"); ok {
			logged++
		}
		c.t = c.t.Add(100 * time.Millisecond)
	}
	if logged != 1 {
		t.Fatalf("71 repeats in 7.1 s logged %d lines, want 1", logged)
	}
	if ok, _ := l.Allow("peer 2"); !ok {
		t.Fatal("another key was suppressed")
	}
	c.t = c.t.Add(3 * time.Second)
	ok, n := l.Allow("peer 3")
	if !ok || n != 70 {
		t.Fatalf("after the interval: ok=%v suppressed=%d, want true 70", ok, n)
	}
	// A clock step back lets the next one through.
	c.t = c.t.Add(-time.Hour)
	if ok, _ := l.Allow("peer 3"); !ok {
		t.Fatal("a clock step back kept the key silent")
	}
}

func TestLimiter_TableIsBounded(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLimiter(time.Second, c.now)
	for i := 0; i < 5*MaxKeys; i++ {
		l.Allow(strings.Repeat("k", i%50) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if n := len(l.keys); n > MaxKeys {
		t.Fatalf("%d keys held, bound %d", n, MaxKeys)
	}
}

func TestStdLog_PrefixesAreLevels(t *testing.T) {
	var b bytes.Buffer
	l, _ := New(&b, "json", slog.LevelDebug)
	std := StdLog(l, "memberlist", nil)
	std.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	std.Printf("[WARN] memberlist: Was able to connect to x over TCP but UDP probes failed")
	std.Printf("[ERR] memberlist: Failed to send")
	std.Printf("[INFO] memberlist: Suspect x")
	std.Printf("no prefix")
	want := []struct{ level, msg string }{
		{"DEBUG", "memberlist: Stream connection from=127.0.0.1:1"},
		{"WARN", "memberlist: Was able to connect to x over TCP but UDP probes failed"},
		{"ERROR", "memberlist: Failed to send"},
		{"INFO", "memberlist: Suspect x"},
		{"INFO", "no prefix"},
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines: %s", len(lines), b.String())
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != want[i].level || rec["msg"] != want[i].msg || rec["lib"] != "memberlist" {
			t.Errorf("line %d: %v, want %v", i, rec, want[i])
		}
	}
}

func TestStdLog_RepeatsAreRateLimited(t *testing.T) {
	var b bytes.Buffer
	l, _ := New(&b, "text", slog.LevelDebug)
	c := &fakeClock{t: time.Unix(1000, 0)}
	std := StdLog(l, "", NewLimiter(10*time.Second, c.now))
	for i := 0; i < 50; i++ {
		std.Printf("[ERR] memberlist: Failed to send ping to 127.0.0.1:%d: refused", 7000+i)
		c.t = c.t.Add(100 * time.Millisecond)
	}
	c.t = c.t.Add(10 * time.Second)
	std.Printf("[ERR] memberlist: Failed to send ping to 127.0.0.1:7001: refused")
	out := b.String()
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, "suppressed=49") {
		t.Fatalf("want 2 lines, the second with suppressed=49:\n%s", out)
	}
}
