package sequencer

import "math/bits"

// tokenBucket paces repairs: it earns rate bytes per second of monotonic
// time, holding at most burst. It computes in 128 bits (bits.Mul64) so that
// no idle time can overflow it, and keeps the sub-byte remainder so that a
// rate of a few bytes per second still refills.
type tokenBucket struct {
	rate    uint64 // bytes per second; 0: no cap
	burst   uint64
	tokens  uint64
	frac    uint64 // bytes·ns earned beyond the whole bytes in tokens; < 1e9
	last    int64  // monotonic time of the last refill
	started bool
}

func (b *tokenBucket) init(rate, burst uint64) {
	*b = tokenBucket{rate: rate, burst: burst}
}

// refill adds what was earned since the last refill. The first call fills
// the bucket. Time that goes back earns nothing.
func (b *tokenBucket) refill(now int64) {
	if b.rate == 0 {
		return
	}
	if !b.started {
		b.tokens, b.frac, b.last, b.started = b.burst, 0, now, true
		return
	}
	if now <= b.last {
		return
	}
	dt := uint64(now - b.last)
	b.last = now
	if b.tokens >= b.burst {
		b.frac = 0
		return
	}
	hi, lo := bits.Mul64(dt, b.rate)
	var carry uint64
	lo, carry = bits.Add64(lo, b.frac, 0)
	hi += carry
	if hi >= 1e9 {
		// The quotient would not fit 64 bits: far more than any burst.
		b.tokens, b.frac = b.burst, 0
		return
	}
	earned, rem := bits.Div64(hi, lo, 1e9)
	if earned >= b.burst-b.tokens {
		b.tokens, b.frac = b.burst, 0
		return
	}
	b.tokens += earned
	b.frac = rem
}

// take spends n bytes if the bucket holds them (always, with no cap).
// has reports whether n bytes could be taken now.
func (b *tokenBucket) has(n int) bool { return b.rate == 0 || b.tokens >= uint64(n) }

func (b *tokenBucket) take(n int) bool {
	if b.rate == 0 {
		return true
	}
	if b.tokens < uint64(n) {
		return false
	}
	b.tokens -= uint64(n)
	return true
}
