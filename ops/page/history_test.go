package page

import (
	"testing"
	"time"
)

func TestHistory_RatesLagAndElections(t *testing.T) {
	h := NewHistory(2)
	t0 := time.Unix(1000, 0)
	s := h.Observe(t0, Status{Primary: 1, Stable: 100, Published: 110, Elections: []Election{{Epoch: 1, Primary: 1}}})
	if s.Rates.StablePerSec != 0 {
		t.Fatalf("first observation: rate %v, want 0", s.Rates.StablePerSec)
	}
	s = h.Observe(t0.Add(2*time.Second), Status{Primary: 1, Stable: 300, Published: 320,
		Receivers: []Receiver{{Name: "member 2", LagSeqs: 50}}})
	if s.Rates.StablePerSec != 100 || s.Rates.PublishedPerSec != 105 {
		t.Fatalf("rates %+v, want 100 and 105 per second", s.Rates)
	}
	if s.Receivers[0].LagSeconds != 0.5 {
		t.Fatalf("lag %v s, want 0.5 (50 seqs at 100/s)", s.Receivers[0].LagSeconds)
	}
	if len(s.Elections) != 1 || s.Elections[0].Epoch != 1 {
		t.Fatalf("elections %+v, want epoch 1 kept though no member reports it now", s.Elections)
	}
	// During a failover no primary: the rate and its base are kept.
	s = h.Observe(t0.Add(3*time.Second), Status{})
	if s.Rates.StablePerSec != 100 {
		t.Fatalf("rate without primary %v, want the last (100)", s.Rates.StablePerSec)
	}
	s = h.Observe(t0.Add(4*time.Second), Status{Primary: 2, Stable: 500, Published: 500,
		Elections: []Election{{Epoch: 3, Primary: 2}, {Epoch: 2, Primary: 3}}})
	if s.Rates.StablePerSec != 100 {
		t.Fatalf("rate after the failover %v, want 100 (200 seqs in 2 s)", s.Rates.StablePerSec)
	}
	if len(s.Elections) != 2 || s.Elections[0].Epoch != 3 || s.Elections[1].Epoch != 2 {
		t.Fatalf("elections %+v, want epochs 3, 2 (newest first, at most 2)", s.Elections)
	}
}
