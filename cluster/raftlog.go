package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seqd/seqd/internal/logging"
)

// raftLog is hashicorp/raft's hclog.Logger on the member's slog logger,
// so raft's lines have the process's format and level. Levels are mapped
// by what the lines mean to an operator of a group of three:
//   - raft's INFO (state changes, every election step) is DEBUG: the
//     member logs its own role changes;
//   - an election's start on a heartbeat or election timeout is INFO, not
//     WARN: every bootstrap has one;
//   - a failed RPC to a peer (appendEntries, heartbeat, vote, snapshot,
//     "failed to contact") is WARN, not ERROR: the group is built to lose
//     a member, and each such line passes a logging.Limiter keyed by the
//     message and the peer (one every 10 s, with the suppressed count);
//   - for the first startupGrace after the member starts they are INFO:
//     members of a group start one after the other, and the first leader
//     fails to reach the last one until it is up;
//   - once the member is stopping (quiet), WARN and ERROR are DEBUG: the
//     peers that stop with it are no news.
//
// Everything else keeps its level.
type raftLog struct {
	l       *slog.Logger
	name    string
	args    []any
	lim     *logging.Limiter
	quiet   *atomic.Bool
	started time.Time // monotonic: the grace of startupGrace
	now     func() time.Time
}

// startupGrace is how long after a member starts its peers' being
// unreachable is INFO, not WARN (systemd or Kubernetes start the three
// within seconds of each other).
const startupGrace = 10 * time.Second

func newRaftLog(l *slog.Logger, name string) *raftLog {
	return &raftLog{l: l, name: name, lim: logging.NewLimiter(logging.DefaultInterval, nil), quiet: new(atomic.Bool),
		started: time.Now(), now: time.Now}
}

// peerRPCFailures are the prefixes of raft's messages about a peer it
// could not reach.
var peerRPCFailures = []string{
	"failed to appendEntries to",
	"failed to heartbeat to",
	"failed to make requestVote RPC",
	"failed to make requestPreVote RPC",
	"failed to pipeline appendEntries",
	"failed to install snapshot",
	"failed to send snapshot to",
	"failed to contact",
	"peer has newer term, stopping replication",
}

// electionStarts are raft's WARN lines that every election has, and
// those of pre-vote doing its job (a member that started late asks for a
// vote while the others have a leader).
var electionStarts = []string{
	"heartbeat timeout reached, starting election",
	"Election timeout reached, restarting election",
	"heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election",
	"rejecting pre-vote request since we have a leader",
	"rejecting vote request since we have a leader",
	"rejecting pre-vote request since node is not a voter",
}

// peerKeys are the attributes that name the peer in raft's lines.
var peerKeys = []string{"peer", "target", "server-id", "id"}

// level is the slog level of a raft line, and whether it is a failure
// about a peer (rate-limited).
func (r *raftLog) level(lv hclog.Level, msg string) (slog.Level, bool) {
	peer := false
	for _, p := range peerRPCFailures {
		if strings.HasPrefix(msg, p) {
			peer = true
		}
	}
	var out slog.Level
	switch {
	case lv <= hclog.Info:
		out = slog.LevelDebug
	case lv == hclog.Warn && hasPrefix(msg, electionStarts):
		out = slog.LevelInfo
	case peer && r.now().Sub(r.started) < startupGrace:
		out = slog.LevelInfo
	case peer:
		out = slog.LevelWarn
	case lv == hclog.Warn:
		out = slog.LevelWarn
	default:
		out = slog.LevelError
	}
	if out > slog.LevelDebug && r.quiet.Load() {
		out = slog.LevelDebug
	}
	return out, peer
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (r *raftLog) Log(lv hclog.Level, msg string, args ...any) {
	level, peer := r.level(lv, msg)
	ctx := context.Background()
	if !r.l.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, len(r.args)+len(args)+4)
	all = append(all, "lib", r.name)
	all = append(all, r.args...)
	all = append(all, args...)
	if peer && level >= slog.LevelInfo {
		key := msg
		for i := 0; i+1 < len(all); i += 2 {
			k, _ := all[i].(string)
			for _, pk := range peerKeys {
				if k == pk {
					key += " " + fmt.Sprint(all[i+1])
				}
			}
		}
		ok, n := r.lim.Allow(key)
		if !ok {
			return
		}
		if n > 0 {
			all = append(all, "suppressed", n)
		}
	}
	r.l.Log(ctx, level, "raft: "+msg, all...)
}

func (r *raftLog) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }
func (r *raftLog) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }
func (r *raftLog) Info(msg string, args ...any)  { r.Log(hclog.Info, msg, args...) }
func (r *raftLog) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLog) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

func (r *raftLog) enabled(lv hclog.Level) bool {
	level, _ := r.level(lv, "")
	return r.l.Enabled(context.Background(), level)
}

func (r *raftLog) IsTrace() bool { return r.enabled(hclog.Trace) }
func (r *raftLog) IsDebug() bool { return r.enabled(hclog.Debug) }
func (r *raftLog) IsInfo() bool  { return r.enabled(hclog.Info) }
func (r *raftLog) IsWarn() bool  { return r.enabled(hclog.Warn) }
func (r *raftLog) IsError() bool { return r.enabled(hclog.Error) }

func (r *raftLog) ImpliedArgs() []any { return r.args }

func (r *raftLog) With(args ...any) hclog.Logger {
	c := *r
	c.args = append(append([]any(nil), r.args...), args...)
	return &c
}

func (r *raftLog) Name() string { return r.name }

func (r *raftLog) Named(name string) hclog.Logger {
	c := *r
	c.name = r.name + "." + name
	return &c
}

func (r *raftLog) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

// SetLevel is ignored: the process's level decides.
func (r *raftLog) SetLevel(hclog.Level) {}

func (r *raftLog) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if r.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

func (r *raftLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

// StandardWriter takes std-log lines with [LEVEL] prefixes (raft's
// transport writes some).
func (r *raftLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdRaftWriter{r}
}

type stdRaftWriter struct{ r *raftLog }

func (w stdRaftWriter) Write(p []byte) (int, error) {
	level, msg := logging.StdLevel(string(p))
	lv := hclog.Info
	switch level {
	case slog.LevelDebug:
		lv = hclog.Debug
	case slog.LevelWarn:
		lv = hclog.Warn
	case slog.LevelError:
		lv = hclog.Error
	}
	w.r.Log(lv, msg)
	return len(p), nil
}
