package cluster

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The prompt check makes a follower notice a silent leader (a partition,
// a dead host: what the death watch cannot prove) exactly one heartbeat
// timeout after the leader's last contact, instead of anywhere from one
// to three.
//
// hashicorp/raft's follower checks its leader when a timer of
// HeartbeatTimeout plus a random extra of up to as much again fires, and
// only then compares the last contact with HeartbeatTimeout: a check that
// comes just before the timeout has passed waits for the next, so a
// follower notices between 1x and 3x the timeout after the last contact,
// and the election waits for the later of the two survivors. The prompt
// check waits for the leader's last contact plus the timeout (plus this
// member's turn, below) and then asks raft to check at once, through raft's public API: ReloadConfig
// with a heartbeat timeout shorter by a nanosecond wakes the follower's
// timer ("update current timer to use the shorter new value"), and the
// timeout is put back at once. raft itself decides, as at any heartbeat
// timeout, pre-vote included: a lone follower that was starved or cut
// off is still refused by the others, and a leader that merely stalled
// for less than the timeout is never questioned.
//
// The survivors take turns (Timeouts.PromptCheck apart, by id, the
// leader left out), as raft's random extra used to space them: two
// followers that time out within a millisecond both win each other's
// pre-vote (neither has a leader any more), both stand in the same term
// and split the vote, one more election timeout. In turns, the first
// clears its leader and campaigns, refused by the second, which still
// has the leader; the second times out a turn later, and the first,
// leaderless now, grants its pre-vote and its vote: one election, a turn
// after the timeout.
//
// Raft requires LeaderLease <= HeartbeatTimeout at every reload, so the
// prompt check needs the lease shorter than the heartbeat timeout
// (Timeouts.Validate).

// promptAction is what the prompt check does after waking.
type promptAction struct {
	force bool          // ask raft to check its leader now
	next  time.Duration // when to wake again
}

// promptStep decides, from what raft reports, whether the leader has been
// silent for due (the heartbeat timeout plus this member's turn: force a
// check) and when to look next. Only a follower that has a leader needs
// it: a candidate and a follower that lost its leader run raft's election
// timers, which are not late.
func promptStep(follower, hasLeader bool, silent, due, heartbeat time.Duration) promptAction {
	if !follower || !hasLeader {
		return promptAction{next: heartbeat}
	}
	if silent >= due {
		return promptAction{force: true, next: heartbeat}
	}
	// Wake when the last contact known now becomes due's old; a contact
	// in between moves the deadline, and the next look sees it.
	return promptAction{next: due - silent + promptSlack}
}

// promptSlack is added to each wait so that the check comes after the
// timeout has passed, not a timer's jitter before it.
const promptSlack = time.Millisecond

// promptedRaft is what the prompt check reads of raft and does to it.
type promptedRaft interface {
	State() raft.RaftState
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	LastContact() time.Time
	ReloadableConfig() raft.ReloadableConfig
	ReloadConfig(raft.ReloadableConfig) error
	// Voters are the voters of the latest configuration.
	Voters() ([]voter, error)
}

// promptCheck runs the prompt check of one member until stop closes.
type promptCheck struct {
	r         promptedRaft
	self      uint64
	heartbeat time.Duration
	stagger   time.Duration // Timeouts.PromptCheck
	log       *slog.Logger
	forced    atomic.Uint64 // checks asked for, for tests
}

func (p *promptCheck) run(stop <-chan struct{}) {
	t := time.NewTimer(p.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		addr, id := p.r.LeaderWithID()
		silent := time.Since(p.r.LastContact())
		due := p.heartbeat
		if silent >= due {
			// Only now is this member's turn needed (the configuration
			// is a copy through raft's loop: not on every wake).
			due += time.Duration(p.turn(parseServerID(id))) * p.stagger
		}
		a := promptStep(p.r.State() == raft.Follower, addr != "", silent, due, p.heartbeat)
		if a.force && !p.force() {
			return
		}
		t.Reset(a.next)
	}
}

// turn is this member's rank among the voters but leader (0 when it has
// none: then it goes first, raft's own timer decides anyway).
func (p *promptCheck) turn(leader uint64) int {
	voters, err := p.r.Voters()
	if err != nil {
		return 0
	}
	rank, _ := watchRank(p.self, leader, voterIDs(voters))
	return rank
}

// force wakes raft's follower timer (a shorter heartbeat timeout for an
// instant). It reports false, after logging why, when raft refuses the
// reload: the check then ends and raft's own timer is left.
func (p *promptCheck) force() bool {
	rc := p.r.ReloadableConfig()
	short := rc
	short.HeartbeatTimeout -= time.Nanosecond
	if err := p.r.ReloadConfig(short); err != nil {
		p.log.Warn("prompt heartbeat check off", "err", err)
		return false
	}
	p.forced.Add(1)
	if err := p.r.ReloadConfig(rc); err != nil {
		p.log.Warn("prompt heartbeat check: restoring the heartbeat timeout", "err", err)
		return false
	}
	return true
}

// promptHandle is promptedRaft over a running raft.
type promptHandle struct{ *raft.Raft }

func (h promptHandle) Voters() ([]voter, error) { return votersOf(h.Raft) }
