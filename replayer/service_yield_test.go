package replayer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/transport/transporttest"
)

// pollCounter returns from every Poll at once (so Run spins through its
// loop on the fake clock) and cancels Run at the stopAt'th.
type pollCounter struct {
	transport.Client
	polls, stopAt int
	cancel        func()
}

func (c *pollCounter) Poll(h transport.Handler, wait time.Duration) (int, error) {
	c.polls++
	if c.polls == c.stopAt {
		c.cancel()
	}
	return c.Client.Poll(h, 0)
}

// A busy service passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestService_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		follow, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		naks, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cl := &pollCounter{Client: follow.Client(), stopAt: 2000, cancel: cancel}
		var mono int64
		cfg := DefaultServiceConfig()
		cfg.Dir = t.TempDir()
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg.Clock = func() int64 { mono += int64(tc.Step); return mono }
		s, err := NewService(cfg, cl, naks.Server())
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Run(ctx)
		cancel()
		tc.Check(t, s.run.Yields(), time.Duration(mono))
	}
}
