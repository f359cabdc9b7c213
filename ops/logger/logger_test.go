package logger

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

var day1 = time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC).UnixNano()

func msg(seq uint64, ns int64, payload string) *node.Message {
	return &node.Message{Seq: seq, Epoch: 1, Time: ns, Account: wire.MustAccount("ALICE"), Instance: 1, CmdSeq: seq, Payload: []byte(payload)}
}

// logAll writes msgs through a Logger of cfg and closes it.
func logAll(t *testing.T, cfg Config, msgs []*node.Message) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		l.OnMessage(m)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// readDir is each file of dir (sorted by name) and its lines.
func readDir(t *testing.T, dir string) (names []string, lines map[string][]string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines = map[string][]string{}
	for _, e := range ents {
		names = append(names, e.Name())
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines[e.Name()] = append(lines[e.Name()], sc.Text())
		}
		f.Close()
	}
	return names, lines
}

// A day's change of the sequencer's time starts a new file, and a file
// that would pass MaxFileBytes the next of the day; every message is in
// exactly one line, in order, and no file passes the limit.
func TestLogger_RotatesByDayAndSize(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir, cfg.MaxFileBytes = t.TempDir(), 4096
	var msgs []*node.Message
	for i := uint64(1); i <= 300; i++ {
		ns := day1 + int64(i)*int64(time.Second) // crosses midnight at seq 60
		msgs = append(msgs, msg(i, ns, fmt.Sprintf("order %d: buy 10 @ 99.5", i)))
	}
	logAll(t, cfg, msgs)
	names, lines := readDir(t, cfg.Dir)
	if names[0] != "seqd-2026-12-01.000.log" || !slices.Contains(names, "seqd-2026-12-02.000.log") || !slices.Contains(names, "seqd-2026-12-02.001.log") {
		t.Fatalf("files %v: want seqd-2026-12-01.000.log, then 2026-12-02.000, .001, ...", names)
	}
	var seq uint64
	for _, n := range names {
		fi, _ := os.Stat(filepath.Join(cfg.Dir, n))
		if fi.Size() > cfg.MaxFileBytes {
			t.Errorf("%s: %d bytes, above MaxFileBytes %d", n, fi.Size(), cfg.MaxFileBytes)
		}
		for _, l := range lines[n] {
			seq++
			want := fmt.Sprintf(" seq=%d epoch=1 from=ALICE/1 cmd=%d size=", seq, seq)
			if !strings.Contains(l, want) || !strings.Contains(l, fmt.Sprintf(`"order %d: buy 10 @ 99.5"`, seq)) {
				t.Fatalf("%s: line %q, want seq %d with its payload", n, l, seq)
			}
			day := n[len("seqd-") : len("seqd-")+len("2026-12-01")]
			if !strings.HasPrefix(l, day) {
				t.Fatalf("%s: line %q of another day", n, l)
			}
		}
	}
	if seq != 300 {
		t.Fatalf("%d lines in all, want 300", seq)
	}
	if !strings.HasPrefix(lines["seqd-2026-12-01.000.log"][0], "2026-12-01T23:59:01.000000000Z seq=1 ") {
		t.Fatalf("first line %q", lines["seqd-2026-12-01.000.log"][0])
	}
}

// JSON Lines: each line is an object with seq tail's keys and the
// payload; a restarted logger appends to the newest file of the day, and
// Keep removes the oldest files.
func TestLogger_JSONRestartAndKeep(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir, cfg.Format, cfg.Daily = t.TempDir(), JSON, false
	bin := "\xff\x00bin"
	logAll(t, cfg, []*node.Message{msg(1, day1, `say "hi"`+"\n"), msg(2, day1, bin)})
	logAll(t, cfg, []*node.Message{msg(3, day1, "again")})
	names, lines := readDir(t, cfg.Dir)
	if len(names) != 1 || names[0] != "seqd-2026-12-01.000.jsonl" || len(lines[names[0]]) != 3 {
		t.Fatalf("files %v lines %v: want one file of 3 lines (the restart appended)", names, lines)
	}
	type rec struct {
		Seq        uint64 `json:"seq"`
		Account    string `json:"account"`
		Payload    string `json:"payload"`
		PayloadHex string `json:"payload_hex"`
	}
	var got []rec
	for _, l := range lines[names[0]] {
		var r rec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, r)
	}
	want := []rec{{1, "ALICE", `say "hi"` + "\n", ""}, {2, "ALICE", "", "ff0062696e"}, {3, "ALICE", "again", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}

	// Size rotation with Keep 2: only the two newest files remain.
	cfg.Dir, cfg.MaxFileBytes, cfg.Keep = t.TempDir(), 4096, 2
	var msgs []*node.Message
	for i := uint64(1); i <= 200; i++ {
		msgs = append(msgs, msg(i, day1, strings.Repeat("x", 100)))
	}
	logAll(t, cfg, msgs)
	names, lines = readDir(t, cfg.Dir)
	if len(names) != 2 {
		t.Fatalf("files %v: want the 2 newest (Keep 2)", names)
	}
	last := lines[names[1]]
	if !strings.HasPrefix(last[len(last)-1], `{"seq":200,`) {
		t.Fatalf("newest file ends %q, want seq 200", last[len(last)-1])
	}
}

// A directory that cannot be written stops the logging with the error.
func TestLogger_WriteErrorFails(t *testing.T) {
	cfg := DefaultConfig()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Dir = filepath.Join(f, "logs") // under a file: cannot exist
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.OnMessage(msg(1, day1, "x"))
	select {
	case <-l.Failed():
	default:
		t.Fatal("Failed not closed after a write error")
	}
	if err := l.Close(); err == nil || !strings.Contains(err.Error(), "logger:") {
		t.Fatalf("Close: %v, want the write error", err)
	}
	if l.Lines() != 0 {
		t.Fatalf("Lines %d, want 0", l.Lines())
	}
}

func TestConfig_ValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) {}, "Dir"},
		{func(c *Config) { c.Dir = "x"; c.Format = "xml" }, "Format"},
		{func(c *Config) { c.Dir = "x"; c.MaxFileBytes = 10 }, "MaxFileBytes"},
		{func(c *Config) { c.Dir = "x"; c.Prefix = "a/b" }, "Prefix"},
		{func(c *Config) { c.Dir = "x"; c.Keep = -1 }, "Keep"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
}
