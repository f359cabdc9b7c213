package transport

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRateLog_OneLinePerIntervalWithCountAndLastError(t *testing.T) {
	var buf bytes.Buffer
	r := RateLog{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Interval: time.Hour, Msg: "refused"}
	first, last := errors.New("first"), errors.New("last")
	r.Note(1, first)
	for range 10000 {
		r.Note(1, last)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 10001 events within one interval, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "count=1 ") || !strings.Contains(buf.String(), "last_err=first") {
		t.Fatalf("first line = %q, want count=1 and last_err=first", buf.String())
	}
	r.Interval = time.Nanosecond
	r.Note(1, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "count=10001 ") || !strings.Contains(lines[1], "total=10002 ") || !strings.Contains(lines[1], "last_err=last") {
		t.Fatalf("second line = %q, want the 10001 folded events, total 10002 and the last error", lines[len(lines)-1])
	}
	if r.Total() != 10002 {
		t.Fatalf("Total = %d, want 10002", r.Total())
	}
}
