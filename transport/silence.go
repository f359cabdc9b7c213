package transport

import (
	"context"
	"log/slog"
	"time"
)

// WarnSilence logs a warning when the client received nothing for after
// (a sequencer heartbeats every few ms, so silence means there is none,
// it is on another group, or its group lost its quorum), repeats it every
// SilenceRepeat(after) while the silence lasts, and says when the stream
// resumes, until ctx ends. Without it a node pointed at the wrong group
// waits in silence until its timeout; with one warning only, a node whose
// group lost its quorum said nothing for 30 s, nor when it came back.
func WarnSilence(ctx context.Context, log *slog.Logger, client Client, where string, after time.Duration) {
	st, ok := client.(Stats)
	if !ok || after <= 0 {
		return
	}
	tick := time.NewTicker(min(after/4, time.Second))
	defer tick.Stop()
	w := NewSilenceWatch(after, st.Counters().FramesReceived, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			switch ev, d := w.Tick(now, st.Counters().FramesReceived); ev {
			case SilenceStarted, SilenceGoesOn:
				what := "no stream from a sequencer yet: is one running on this group?"
				if w.Heard() {
					what = "the stream stopped: is the sequencer running, and does its group have a quorum (2 of 3 members)?"
				}
				log.Warn(what, "silent_for", d.Round(time.Millisecond).String(), "listening", where)
			case SilenceEnded:
				log.Info("the stream resumed", "silent_for", d.Round(time.Millisecond).String(), "listening", where)
			}
		}
	}
}

// SilenceEvent is what a SilenceWatch's Tick saw.
type SilenceEvent int

const (
	// SilenceNone: nothing to say.
	SilenceNone SilenceEvent = iota
	// SilenceStarted: nothing arrived for the watch's after.
	SilenceStarted
	// SilenceGoesOn: the silence lasted another SilenceRepeat.
	SilenceGoesOn
	// SilenceEnded: frames arrive again after a silence that was warned.
	SilenceEnded
)

// SilenceRepeat is how often a silence is warned again: twice after,
// within 5..30 s (a 3 s after warns every 6 s).
func SilenceRepeat(after time.Duration) time.Duration {
	return min(max(2*after, 5*time.Second), 30*time.Second)
}

// SilenceWatch is WarnSilence's pure core: fed the frame counter and the
// time, it says when a silence starts, goes on and ends.
type SilenceWatch struct {
	after, repeat time.Duration
	last          uint64
	heard         bool
	quiet         time.Time // since when nothing arrived
	due           time.Duration
	warned        bool
}

// NewSilenceWatch starts watching at now with the counter at frames.
func NewSilenceWatch(after time.Duration, frames uint64, now time.Time) *SilenceWatch {
	return &SilenceWatch{after: after, repeat: SilenceRepeat(after), last: frames, heard: frames > 0, quiet: now, due: after}
}

// Heard reports whether any frame arrived yet.
func (w *SilenceWatch) Heard() bool { return w.heard }

// Tick takes the counter at now and returns the event, with how long the
// silence lasted (so far, or in all when it ended).
func (w *SilenceWatch) Tick(now time.Time, frames uint64) (SilenceEvent, time.Duration) {
	d := now.Sub(w.quiet)
	if frames != w.last {
		w.last, w.heard = frames, true
		w.quiet, w.due = now, w.after
		if w.warned {
			w.warned = false
			return SilenceEnded, d
		}
		return SilenceNone, 0
	}
	if d < w.due {
		return SilenceNone, 0
	}
	ev := SilenceStarted
	if w.warned {
		ev = SilenceGoesOn
	}
	w.warned = true
	w.due = d + w.repeat
	return ev, d
}
