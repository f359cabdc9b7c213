package solo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/open"
	"github.com/seqd/seqd/transport/tcp"
)

// Config is a lone sequencer process.
type Config struct {
	// Sequencer is the sequencer's configuration (its session included).
	Sequencer sequencer.Config
	// Transport is the server end to open, faults included; the probe
	// for a live session listens on it without faults.
	Transport open.Config
	// ListenBeforeStart is how long to listen for a live session before
	// starting (0: do not listen).
	ListenBeforeStart time.Duration
	// Force starts over a live session: every node of it stops.
	Force bool
	// IdleSpin keeps the agent polling this long after each frame.
	IdleSpin time.Duration
	// Wrap, when set, wraps the opened server (the bench's publish-time
	// tracer); AfterStop, when set, runs once the agent stopped, before
	// the stopped line, and its error is Run's.
	Wrap      func(transport.Server) transport.Server
	AfterStop func() error
	// OnStart, when set, gets the agent and its server once both are
	// built, before the ready line: the admin surface reads the agent's
	// Stats and LastSeq (safe from any goroutine) from there. An error
	// stops the start.
	OnStart func(*sequencer.Agent, transport.Server) error
	// Out receives the ready and stopped lines (nil: os.Stdout).
	Out io.Writer
	// Logger hears the probe, the start and the stop; nil logs nowhere.
	Logger *slog.Logger
}

// DefaultConfig listens 200 ms before starting, as the CLI does.
func DefaultConfig() Config {
	return Config{Sequencer: sequencer.DefaultConfig(), ListenBeforeStart: 200 * time.Millisecond}
}

// Validate checks the sequencer and the transport.
func (c Config) Validate() error {
	if err := c.Sequencer.Validate(); err != nil {
		return err
	}
	if c.ListenBeforeStart < 0 {
		return fmt.Errorf("%w: ListenBeforeStart %v (want >= 0)", ErrConfig, c.ListenBeforeStart)
	}
	return c.Transport.ValidateServer()
}

// StoppedLine is the sequencer's last stdout line, printed however it
// stops (a stop during start-up included), so that scripts can wait for
// it.
func StoppedLine(lastSeq uint64, st sequencer.Stats, allocs float64) string {
	return fmt.Sprintf("sequencer: stopped last_seq=%d commands=%d duplicates=%d naks=%d retransmitted=%d multicast_repairs=%d throttled=%d allocs_per_msg=%.4f",
		lastSeq, st.Commands, st.Duplicates, st.Naks, st.Retransmitted, st.RepairsMulticast, st.Throttled, allocs)
}

// Run probes, opens and serves until ctx ends (nil then) or the agent
// fails. A ctx that ends during start-up ends Run with nil and the
// stopped line, as a stop while serving does.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	out, log := cfg.Out, cfg.Logger
	if out == nil {
		out = os.Stdout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stoppedInStartup := func() error {
		fmt.Fprintln(out, StoppedLine(0, sequencer.Stats{}, 0))
		log.Info("sequencer stopped during start-up", "cause", fmt.Sprint(context.Cause(ctx)))
		return nil
	}
	if ctx.Err() != nil {
		return stoppedInStartup()
	}
	live, err := probeLiveSession(ctx, cfg.Transport, log, cfg.ListenBeforeStart)
	if err != nil {
		return err
	}
	if live != nil {
		if !cfg.Force {
			return fmt.Errorf("session %d is live on %s (last seq %d): a second sequencer there would share its channel (its nodes ignore the new session while it publishes, and stop once it falls silent); stop that sequencer, choose other groups, or pass --force to take the stream over",
				live.session, live.where, live.lastSeq)
		}
		log.Warn("--force: STARTING OVER A LIVE SESSION: its nodes ignore this one while it publishes, and stop once it falls silent (new session on the stream)",
			"live_session", live.session, "listening", live.where, "new_session", cfg.Sequencer.Session)
	}
	if ctx.Err() != nil {
		return stoppedInStartup()
	}
	srv, err := open.Server(cfg.Transport)
	if err != nil {
		return err
	}
	defer srv.Close()
	if ctx.Err() != nil {
		return stoppedInStartup()
	}
	served := srv
	if cfg.Wrap != nil {
		served = cfg.Wrap(srv)
	}
	agent, err := sequencer.NewAgent(cfg.Sequencer, served, sequencer.SystemClock())
	if err != nil {
		return err
	}
	agent.SetIdleSpin(cfg.IdleSpin)
	if cfg.OnStart != nil {
		if err := cfg.OnStart(agent, served); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return stoppedInStartup()
	}
	// Over UDP the agent's goroutine blocks in epoll itself: a thread of
	// its own keeps it warm (batched throughput 1.0-1.46M msg/s locked,
	// 0.56-1.26M not, in pairs of runs). Over TCP it waits on channels
	// fed by the connections' reader goroutines, and a locked goroutine
	// must be handed its own thread at every wake: rtt to the sequencer
	// took a median 17 us locked, 12 us not, throughput the same.
	if cfg.Transport.Transport != open.TCP {
		runtime.LockOSThread()
	}
	// The ready line is for scripts and `seqd bench`: the sequencer is
	// serving once it is printed.
	line := fmt.Sprintf("sequencer: ready transport=%s session=%d", cfg.Transport.Transport, cfg.Sequencer.Session)
	if t, ok := srv.(*tcp.Server); ok {
		line += " tcp=" + t.Addr().String()
	}
	fmt.Fprintln(out, line)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	log.Info("sequencer serving", "session", cfg.Sequencer.Session, "transport", cfg.Transport.Transport, "pid", os.Getpid())
	err = agent.Run(ctx)
	runtime.ReadMemStats(&ms1)
	st := agent.Stats()
	allocs := 0.0
	if st.Messages > 0 {
		allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(st.Messages)
	}
	var afterErr error
	if cfg.AfterStop != nil {
		afterErr = cfg.AfterStop()
	}
	fmt.Fprintln(out, StoppedLine(agent.LastSeq(), st, allocs))
	log.Info("sequencer stopped", "last_seq", agent.LastSeq(), "commands", st.Commands, "duplicates", st.Duplicates,
		"naks", st.Naks, "retransmitted", st.Retransmitted, "gones", st.Gones, "malformed", st.Malformed,
		"rejected", st.Rejected, "senders_forgotten", st.SendersForgotten, "reassemblies_expired", st.ReassembliesExpired)
	if afterErr != nil {
		return afterErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
