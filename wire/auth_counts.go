package wire

import "sync/atomic"

// AuthFailureCounts counts received frames that failed authentication
// (Auth.Verify) by the kind their prefix claims: index Kind (KindData,
// KindCommand...) masked to 0..7, index 0 for frames with no valid
// prefix. Both transports keep one per endpoint, so the per-kind figures
// and the total mean the same everywhere. Safe from any goroutine; the
// zero value is ready.
type AuthFailureCounts [8]atomic.Uint64

// Add counts n failures of kind k.
func (c *AuthFailureCounts) Add(k int, n uint64) { c[k&7].Add(n) }

// Total is the sum over every kind.
func (c *AuthFailureCounts) Total() uint64 {
	var n uint64
	for i := range c {
		n += c[i].Load()
	}
	return n
}

// ByKind is a copy of the counts, by kind.
func (c *AuthFailureCounts) ByKind() [8]uint64 {
	var out [8]uint64
	for i := range c {
		out[i] = c[i].Load()
	}
	return out
}
