package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/transporttest"
)

// fakeAgent records the waits it was given and moves a fake clock on by
// step per Poll; it has timed work every due ns (0: none).
type fakeAgent struct {
	mono    *int64
	step    time.Duration
	due     int64
	waits   []time.Duration
	frames  int
	works   int
	stopAt  int
	lastNow int64
}

var errStop = errors.New("stop")

func (a *fakeAgent) Poll(wait time.Duration) (int, error) {
	a.waits = append(a.waits, wait)
	*a.mono += int64(a.step)
	return a.frames, nil
}

func (a *fakeAgent) DoWork(now int64) (int, error) {
	a.works++
	a.lastNow = now
	if a.works == a.stopAt {
		return 0, errStop
	}
	return 0, nil
}

func (a *fakeAgent) NextDue() (int64, bool) {
	if a.due == 0 {
		return 0, false
	}
	return a.lastNow + a.due, true
}

func newRunner(t *testing.T, mono *int64, maxWait time.Duration) *Runner {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxWait = maxWait
	cfg.Clock = func() int64 { return *mono }
	r, err := NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An idle loop blocks until its agent's next timed work, never longer
// than MaxWait, and never polls without blocking.
func TestRunner_IdleLoopBlocksUntilNextDue(t *testing.T) {
	for _, tt := range []struct {
		name string
		due  int64
		want time.Duration
	}{
		{"due in 10ms", int64(10 * time.Millisecond), 10 * time.Millisecond},
		{"no timed work", 0, DefaultMaxWait},
		{"due beyond MaxWait", int64(time.Second), DefaultMaxWait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mono int64
			r := newRunner(t, &mono, DefaultMaxWait)
			a := &fakeAgent{mono: &mono, due: tt.due, stopAt: 5}
			if err := r.Run(context.Background(), a); !errors.Is(err, errStop) {
				t.Fatalf("Run = %v, want the agent's error", err)
			}
			for i, w := range a.waits[1:] { // the first does not block
				if w != tt.want {
					t.Fatalf("poll %d waits %v, want %v", i+1, w, tt.want)
				}
			}
			if r.Waits() != uint64(len(a.waits)-1) {
				t.Fatalf("%d of %d polls blocked", r.Waits(), len(a.waits))
			}
		})
	}
}

// Work due now (or in the past) makes the next Poll return at once.
func TestRunner_DueWorkPollsWithoutBlocking(t *testing.T) {
	var mono int64
	r := newRunner(t, &mono, DefaultMaxWait)
	a := &fakeAgent{mono: &mono, step: time.Millisecond, due: -1, stopAt: 3}
	_ = r.Run(context.Background(), a)
	for i, w := range a.waits {
		if w != 0 {
			t.Fatalf("poll %d waits %v with work due", i, w)
		}
	}
}

// DoWork gets the reading taken after Poll returned.
func TestRunner_DoWorkGetsTheReadingAfterPoll(t *testing.T) {
	var mono int64
	r := newRunner(t, &mono, DefaultMaxWait)
	a := &fakeAgent{mono: &mono, step: 7}
	for i := 1; i <= 3; i++ {
		if err := r.Once(a); err != nil {
			t.Fatal(err)
		}
		if a.lastNow != int64(7*i) || r.Now() != a.lastNow {
			t.Fatalf("iteration %d: DoWork at %d (runner %d), want %d", i, a.lastNow, r.Now(), 7*i)
		}
	}
}

// Run ends with ctx.
func TestRunner_RunEndsWithContext(t *testing.T) {
	var mono int64
	r := newRunner(t, &mono, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx, &fakeAgent{mono: &mono}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// A busy loop passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestRunner_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		var mono int64
		r := newRunner(t, &mono, DefaultMaxWait)
		a := &fakeAgent{mono: &mono, step: tc.Step}
		for range 2000 {
			if err := r.Once(a); err != nil {
				t.Fatal(err)
			}
		}
		tc.Check(t, r.Yields(), time.Duration(mono))
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*Config)
	}{
		{"MaxWait", func(c *Config) { c.MaxWait = 0 }},
		{"Spin", func(c *Config) { c.Spin = -1 }},
	} {
		c := DefaultConfig()
		tt.mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", tt.name, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// An iteration allocates nothing.
func TestRunner_OnceAllocatesNothing(t *testing.T) {
	var mono int64
	r := newRunner(t, &mono, DefaultMaxWait)
	a := &fakeAgent{mono: &mono, step: 1, waits: make([]time.Duration, 0, 1000)}
	if n := testing.AllocsPerRun(100, func() { _ = r.Once(a) }); n != 0 {
		t.Fatalf("Once allocates %v per iteration", n)
	}
}

// The first Poll does not block: the runner has no reading to count a
// deadline from, and the agent's first work is done at once.
func TestRunner_FirstPollDoesNotBlock(t *testing.T) {
	var mono int64
	r := newRunner(t, &mono, DefaultMaxWait)
	a := &fakeAgent{mono: &mono, due: int64(time.Second)}
	if err := r.Once(a); err != nil {
		t.Fatal(err)
	}
	if a.waits[0] != 0 {
		t.Fatalf("first poll waits %v, want 0", a.waits[0])
	}
}

// workAgent polls no frame and reports work from DoWork.
type workAgent struct {
	fakeAgent
	work int
}

func (a *workAgent) DoWork(now int64) (int, error) {
	_, err := a.fakeAgent.DoWork(now)
	return a.work, err
}

// With Spin, a loop that did work keeps polling without blocking, as
// after a frame; one that did nothing blocks.
func TestRunner_SpinsAfterWork(t *testing.T) {
	for _, work := range []int{0, 1} {
		var mono int64
		cfg := DefaultConfig()
		cfg.Spin = time.Hour
		cfg.Clock = func() int64 { return mono }
		r, err := NewRunner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a := &workAgent{fakeAgent: fakeAgent{mono: &mono, due: int64(time.Millisecond)}, work: work}
		for range 3 {
			if err := r.Once(a); err != nil {
				t.Fatal(err)
			}
		}
		blocked := a.waits[2] > 0
		if blocked != (work == 0) {
			t.Fatalf("work %d: third poll waits %v", work, a.waits[2])
		}
	}
}
