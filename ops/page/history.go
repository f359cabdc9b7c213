package page

import (
	"cmp"
	"slices"
	"time"
)

// History turns successive gatherings into what one alone cannot say:
// rates, lag in seconds, and the elections seen over time (each member
// reports only the last change it led). It is a pure core: no clock, no
// goroutine; the caller passes the time and serialises calls.
type History struct {
	max       int // elections kept
	last      time.Time
	stable    uint64
	published uint64
	rates     Rates
	elections []Election
}

// NewHistory keeps the last maxElections elections (at least 1).
func NewHistory(maxElections int) *History {
	return &History{max: max(maxElections, 1)}
}

// Observe adds s, gathered at now, and returns s with Rates, each
// receiver's LagSeconds and Elections filled in. A gathering with no
// primary keeps the last rates' time base so a failover does not show a
// false burst afterwards.
func (h *History) Observe(now time.Time, s Status) Status {
	if !h.last.IsZero() && now.After(h.last) && s.Primary != 0 {
		dt := now.Sub(h.last).Seconds()
		if s.Stable >= h.stable && s.Published >= h.published && dt > 0 {
			h.rates = Rates{
				StablePerSec:    float64(s.Stable-h.stable) / dt,
				PublishedPerSec: float64(s.Published-h.published) / dt,
			}
		}
	}
	if s.Primary != 0 {
		h.last, h.stable, h.published = now, s.Stable, s.Published
	}
	s.Rates = h.rates
	for i := range s.Receivers {
		r := &s.Receivers[i]
		if h.rates.StablePerSec > 0 {
			r.LagSeconds = float64(r.LagSeqs) / h.rates.StablePerSec
		}
	}
	for _, e := range s.Elections {
		i := slices.IndexFunc(h.elections, func(o Election) bool { return o.Epoch == e.Epoch })
		if i < 0 {
			h.elections = append(h.elections, e)
		} else {
			h.elections[i] = e
		}
	}
	// Newest first; drop the oldest beyond max.
	slices.SortFunc(h.elections, func(a, b Election) int { return cmp.Compare(b.Epoch, a.Epoch) })
	if len(h.elections) > h.max {
		h.elections = h.elections[:h.max]
	}
	s.Elections = slices.Clone(h.elections)
	return s
}
