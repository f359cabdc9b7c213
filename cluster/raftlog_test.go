package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftLog_LevelsAndRepeats: raft's lines reach the member's logger at
// levels an operator can act on: a bootstrap's election start is INFO,
// not WARN; a dead peer's failed RPCs are WARN, one per peer and message
// per interval (71 lines in 10 s were ERRORs); raft's INFO chatter is
// DEBUG; once the member stops, nothing is above DEBUG.
func TestRaftLog_LevelsAndRepeats(t *testing.T) {
	var b bytes.Buffer
	l := newRaftLog(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	var h hclog.Logger = l
	// At start, a peer not up yet is INFO (the group starts one by one),
	// rate-limited too (a peer killed in the first 10 s gave 41 lines).
	for i := 0; i < 40; i++ {
		h.Error("failed to appendEntries to", "peer", "{Voter 7 127.0.0.1:1}", "error", "connection refused")
	}
	if !strings.Contains(b.String(), "level=INFO") || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("a peer unreachable at start, 40 times: %q, want one INFO line", b.String())
	}
	b.Reset()
	l.started = l.started.Add(-startupGrace)
	h.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	h.Info("entering follower state", "follower", "x")
	h.Warn("rejecting pre-vote request since we have a leader", "from", "127.0.0.1:1", "leader", "127.0.0.1:2")
	for i := 0; i < 71; i++ {
		h.Error("failed to appendEntries to", "peer", "{Voter 3 127.0.0.1:17303}", "error", "connection refused")
		h.Error("failed to heartbeat to", "peer", "127.0.0.1:17303", "backoff time", "150ms", "error", "connection refused")
	}
	h.Error("failed to appendEntries to", "peer", "{Voter 2 127.0.0.1:17302}", "error", "connection refused")
	h.Error("failed to take snapshot", "error", "disk full")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		`level=INFO msg="raft: heartbeat timeout reached, starting election"`,
		`level=INFO msg="raft: rejecting pre-vote request since we have a leader"`,
		`level=WARN msg="raft: failed to appendEntries to" lib=raft peer="{Voter 3 127.0.0.1:17303}"`,
		`level=WARN msg="raft: failed to heartbeat to" lib=raft peer=127.0.0.1:17303`,
		`level=WARN msg="raft: failed to appendEntries to" lib=raft peer="{Voter 2 127.0.0.1:17302}"`,
		`level=ERROR msg="raft: failed to take snapshot"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], w)
		}
	}
	b.Reset()
	st := &raftStores{log: l}
	st.quiet()
	h.Error("failed to appendEntries to", "peer", "{Voter 9 127.0.0.1:1}", "error", "connection reset by peer")
	h.Error("failed to take snapshot", "error", "shutdown")
	if b.Len() != 0 {
		t.Fatalf("a stopping member logged:\n%s", b.String())
	}
}
