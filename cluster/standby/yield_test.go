package standby

import (
	"context"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/transporttest"
)

// steppedClient is a standby's client whose every Poll returns at once,
// moves the fake clock on by step and, at the stopAt'th, cancels Run.
type steppedClient struct {
	standbytest.Client
	mono          *int64
	step          time.Duration
	polls, stopAt int
	cancel        func()
}

func (c *steppedClient) Poll(transport.Handler, time.Duration) (int, error) {
	*c.mono += int64(c.step)
	if c.polls++; c.polls == c.stopAt {
		c.cancel()
	}
	return 0, nil
}

// A busy standby's Run passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestStandby_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		ctx, cancel := context.WithCancel(context.Background())
		var mono int64
		c := &steppedClient{mono: &mono, step: tc.Step, stopAt: 2000, cancel: cancel}
		cfg := standbyConfig(t, 2)
		cfg.Clock = func() int64 { return mono }
		s := newStandby(t, cfg, c)
		_ = s.Run(ctx)
		cancel()
		tc.Check(t, s.run.Yields(), time.Duration(mono))
	}
}
