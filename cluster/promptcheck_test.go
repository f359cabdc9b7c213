package cluster

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestPromptStep: a follower with a leader is checked once the leader
// has been silent for its due time (heartbeat plus turn), and looks again
// when the last contact it knows becomes due's old; a candidate, a
// leader and a leaderless follower are left to raft's timers.
func TestPromptStep(t *testing.T) {
	const hb = 300 * time.Millisecond
	cases := []struct {
		name             string
		follower, leader bool
		silent, due      time.Duration
		want             promptAction
	}{
		{"fresh contact", true, true, 10 * time.Millisecond, hb, promptAction{next: hb - 10*time.Millisecond + promptSlack}},
		{"silent for the timeout", true, true, hb, hb, promptAction{force: true, next: hb}},
		{"silent, but a later turn", true, true, hb, hb + 50*time.Millisecond, promptAction{next: 50*time.Millisecond + promptSlack}},
		{"silent past its turn", true, true, hb + 60*time.Millisecond, hb + 50*time.Millisecond, promptAction{force: true, next: hb}},
		{"no leader", true, false, time.Hour, hb, promptAction{next: hb}},
		{"candidate", false, true, time.Hour, hb, promptAction{next: hb}},
	}
	for _, tc := range cases {
		if got := promptStep(tc.follower, tc.leader, tc.silent, tc.due, hb); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// fakePrompted records the reloads of a prompt check.
type fakePrompted struct {
	rc      raft.ReloadableConfig
	reloads []time.Duration
	lease   time.Duration
}

func (f *fakePrompted) State() raft.RaftState { return raft.Follower }
func (f *fakePrompted) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	return "a:1", "1"
}
func (f *fakePrompted) LastContact() time.Time                  { return time.Time{} }
func (f *fakePrompted) ReloadableConfig() raft.ReloadableConfig { return f.rc }
func (f *fakePrompted) Voters() ([]voter, error) {
	return []voter{{1, "a:1"}, {2, "a:2"}, {3, "a:3"}}, nil
}
func (f *fakePrompted) ReloadConfig(rc raft.ReloadableConfig) error {
	if rc.HeartbeatTimeout < f.lease {
		return raft.ErrUnsupportedProtocol // any error: raft's ValidateConfig refused
	}
	f.reloads = append(f.reloads, rc.HeartbeatTimeout)
	f.rc = rc
	return nil
}

// TestPromptCheck_ForceShortensForAnInstant: the check wakes raft's
// follower timer with a heartbeat timeout a nanosecond shorter (raft
// resets its timer only for a shorter one), then puts it back; when raft
// refuses (a lease not below the timeout), the check gives up, leaving
// raft's timer, and the timeout is as it was.
func TestPromptCheck_ForceShortensForAnInstant(t *testing.T) {
	const hb = 300 * time.Millisecond
	f := &fakePrompted{rc: raft.ReloadableConfig{HeartbeatTimeout: hb}, lease: 290 * time.Millisecond}
	p := &promptCheck{r: f, self: 2, heartbeat: hb, stagger: 50 * time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if !p.force() {
		t.Fatal("force refused")
	}
	if want := []time.Duration{hb - time.Nanosecond, hb}; len(f.reloads) != 2 || f.reloads[0] != want[0] || f.reloads[1] != want[1] {
		t.Errorf("reloads %v, want %v", f.reloads, want)
	}
	f.lease, f.reloads = hb, nil
	if p.force() {
		t.Error("force with the lease at the timeout: want refused")
	}
	if f.rc.HeartbeatTimeout != hb || len(f.reloads) != 0 {
		t.Errorf("timeout %v after a refused force (reloads %v)", f.rc.HeartbeatTimeout, f.reloads)
	}
	// Member 3 follows leader 1 behind member 2: one turn.
	p.self = 3
	if got := p.turn(1); got != 1 {
		t.Errorf("turn %d, want 1", got)
	}
}
