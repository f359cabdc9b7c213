package transport

import (
	"context"
	"log/slog"
	"time"
)

// WarnSilence logs a warning when the client received nothing for after
// (a sequencer heartbeats every few ms, so silence means there is none,
// or it is on another group), then every 10*after while the silence
// lasts, until ctx ends. Without it a node pointed at the wrong group
// waits in silence until its timeout.
func WarnSilence(ctx context.Context, log *slog.Logger, client Client, where string, after time.Duration) {
	st, ok := client.(Stats)
	if !ok || after <= 0 {
		return
	}
	tick := time.NewTicker(min(after/4, time.Second))
	defer tick.Stop()
	last := st.Counters().FramesReceived
	quiet := time.Now()
	due := after
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if n := st.Counters().FramesReceived; n != last {
				last, quiet, due = n, now, after
				continue
			}
			if d := now.Sub(quiet); d >= due {
				what := "no stream from a sequencer yet: is one running on this group?"
				if last > 0 {
					what = "the stream stopped: is the sequencer still running?"
				}
				log.Warn(what, "silent_for", d.Round(time.Millisecond).String(), "listening", where)
				due = d + 10*after
			}
		}
	}
}
