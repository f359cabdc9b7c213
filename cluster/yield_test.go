package cluster

import (
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/transporttest"
)

// steppedServer is a stream server whose every Poll returns at once and
// moves the fake clock on by step.
type steppedServer struct {
	transport.Server
	mono *int64
	step time.Duration
}

func (s *steppedServer) Poll(transport.Handler, time.Duration) (int, error) {
	*s.mono += int64(s.step)
	return 0, nil
}

// A busy primary's loop passes through the Go scheduler about once per
// transport.YieldInterval, an idle one never (transport.Yield says why).
func TestPrimaryShell_BusyLoopYieldsToTheScheduler(t *testing.T) {
	for _, tc := range transporttest.YieldCases {
		var mono int64
		sh, _ := fakeClockPrimaryShell(t, &mono, func(s transport.Server) transport.Server {
			return &steppedServer{Server: s, mono: &mono, step: tc.Step}
		})
		for range 2000 {
			if _, err := sh.turn(); err != nil {
				t.Fatal(err)
			}
		}
		tc.Check(t, sh.run.Yields(), time.Duration(mono))
	}
}
