package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/seqd/seqd/transport"
)

// Agent is one process loop's work; see the package comment.
type Agent interface {
	// Poll waits at most wait for input on the agent's transport and
	// handles every frame that came; it returns how many.
	Poll(wait time.Duration) (frames int, err error)
	// DoWork does the rest of one iteration at now (Config.Clock's
	// reading) and returns how much work it did beyond the frames Poll
	// counted (0: none, or only what the frames asked for); the Runner
	// counts it with the frames for Config.Spin.
	DoWork(now int64) (work int, err error)
	// NextDue is the Config.Clock time of the agent's next timed work;
	// false when it has none (the Runner then waits up to MaxWait).
	NextDue() (due int64, ok bool)
}

// DefaultMaxWait is the longest blocking Poll by default: a change the
// agent's NextDue does not know of (a bug, a new kind of timed work)
// costs at most this much delay.
const DefaultMaxWait = 100 * time.Millisecond

// Config is a Runner's idle strategy and clock.
type Config struct {
	// MaxWait bounds every Poll's wait. An agent whose transport cannot
	// be woken (not a transport.Waker) keeps it short, so that what
	// another goroutine asks is seen soon enough.
	MaxWait time.Duration
	// Spin keeps polling without blocking for Spin after a frame
	// (transport.Idle): lower latency for a busy loop, at a core's cost.
	Spin time.Duration
	// Clock is the monotonic clock in ns, read once per iteration after
	// Poll; nil: the time since the Runner was built.
	Clock func() int64
}

// DefaultConfig waits up to DefaultMaxWait, never spins, and reads the
// time since the Runner was built.
func DefaultConfig() Config { return Config{MaxWait: DefaultMaxWait} }

// Validate reports the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxWait <= 0:
		return fmt.Errorf("%w: MaxWait %v, want > 0", ErrConfig, c.MaxWait)
	case c.Spin < 0:
		return fmt.Errorf("%w: Spin %v, want >= 0", ErrConfig, c.Spin)
	}
	return nil
}

// Runner drives an Agent; see the package comment.
type Runner struct {
	maxWait time.Duration
	clock   func() int64
	start   time.Time
	idle    transport.Idle
	yield   transport.Yield
	now     int64 // the last iteration's reading
	busy    int   // frames and work of the last iteration (Spin)
	waited  uint64
	started bool // now holds a reading
}

// NewRunner validates cfg and returns a Runner.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{maxWait: cfg.MaxWait, clock: cfg.Clock, start: time.Now(), idle: transport.Idle{Spin: cfg.Spin}}
	if r.clock == nil {
		r.clock = r.sinceStart
	}
	return r, nil
}

func (r *Runner) sinceStart() int64 { return int64(time.Since(r.start)) }

// Run runs iterations until ctx ends (it returns ctx.Err()) or one
// fails (it returns that error).
func (r *Runner) Run(ctx context.Context, a Agent) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.Once(a); err != nil {
			return err
		}
	}
}

// Once runs one iteration: Poll, the clock, DoWork, the yield.
func (r *Runner) Once(a Agent) error {
	wait := r.Wait(a)
	if wait > 0 {
		r.waited++
	}
	frames, err := a.Poll(wait)
	if err != nil {
		return err
	}
	r.now, r.started = r.clock(), true
	work, err := a.DoWork(r.now)
	if err != nil {
		return err
	}
	r.busy = frames + work
	r.yield.Maybe(r.now)
	return nil
}

// Wait is how long the next Poll may block: until a's next timed work as
// of the last reading, at most MaxWait, 0 while spinning. The first
// Poll does not block: there is no reading yet to count from.
func (r *Runner) Wait(a Agent) time.Duration {
	if !r.started {
		return 0
	}
	w := r.maxWait
	if due, ok := a.NextDue(); ok {
		w = min(w, time.Duration(max(0, due-r.now)))
	}
	return r.idle.Wait(r.busy, w)
}

// Now is the last iteration's clock reading.
func (r *Runner) Now() int64 { return r.now }

// Yields is how many times the loop passed through the scheduler.
func (r *Runner) Yields() uint64 { return r.yield.Count() }

// Waits is how many Polls were allowed to block.
func (r *Runner) Waits() uint64 { return r.waited }
