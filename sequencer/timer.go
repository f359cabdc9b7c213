package sequencer

import (
	"math"

	"github.com/seqd/seqd/wire"
)

// timerKey names a centralized timer: the requester and its timer ID.
type timerKey struct {
	account  wire.Account
	instance uint8
	id       uint64
}

type timer struct {
	key    timerKey
	at     int64 // next firing, sequencer time
	period int64 // 0 = once
	pos    int   // index in the heap
}

// timerTable holds the scheduled timers: a map from key to slot (written
// only when a timer is set) and a binary min-heap of slots by due time.
type timerTable struct {
	index map[timerKey]int32
	list  []timer
	free  []int32
	heap  []int32
}

func (t *timerTable) init() { t.index = make(map[timerKey]int32) }

// less orders by due time, then by key, so timers due at the same time
// fire in the same order in every run, whatever the order they were set.
func (t *timerTable) less(i, j int) bool {
	a, b := &t.list[t.heap[i]], &t.list[t.heap[j]]
	switch {
	case a.at != b.at:
		return a.at < b.at
	case a.key.account != b.key.account:
		return a.key.account < b.key.account
	case a.key.instance != b.key.instance:
		return a.key.instance < b.key.instance
	}
	return a.key.id < b.key.id
}

func (t *timerTable) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.list[t.heap[i]].pos = i
	t.list[t.heap[j]].pos = j
}

func (t *timerTable) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *timerTable) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}

func (t *timerTable) fix(i int) {
	t.up(i)
	t.down(t.list[t.heap[i]].pos)
}

// timerRate is how often a timer of period ns fires, in thousandths of a
// firing per second (rounded up); 0 for a one-shot timer. A sender's
// timers' rates add up in its entry (sender.timerRate), bounded by
// Config.MaxTimerFiresPerSecond.
func timerRate(period int64) uint64 {
	if period <= 0 {
		return 0
	}
	return (timerRateUnit + uint64(period) - 1) / uint64(period)
}

// timerRateUnit: one firing a second is 1000 in timerRate, at 1ns periods
// 1e12; 2^20 timers of that sum below 2^64.
const timerRateUnit = 1e12

// rateOf is timerRate of timer k's period, or 0 if there is no such timer.
func (t *timerTable) rateOf(k timerKey) uint64 {
	if s, ok := t.index[k]; ok {
		return timerRate(t.list[s].period)
	}
	return 0
}

// set schedules (or replaces) a timer and reports whether it is new.
func (t *timerTable) set(k timerKey, at, period int64) bool {
	if s, ok := t.index[k]; ok {
		tm := &t.list[s]
		tm.at, tm.period = at, period
		t.fix(tm.pos)
		return false
	}
	var s int32
	if n := len(t.free); n > 0 {
		s = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.list = append(t.list, timer{})
		s = int32(len(t.list) - 1)
	}
	t.list[s] = timer{key: k, at: at, period: period, pos: len(t.heap)}
	t.heap = append(t.heap, s)
	t.up(len(t.heap) - 1)
	t.index[k] = s
	return true
}

// cancel removes a timer and reports whether it existed (it may have
// fired).
func (t *timerTable) cancel(k timerKey) bool {
	s, ok := t.index[k]
	if !ok {
		return false
	}
	delete(t.index, k)
	i := t.list[s].pos
	last := len(t.heap) - 1
	if i != last {
		t.swap(i, last)
	}
	t.heap = t.heap[:last]
	if i != last {
		t.fix(i)
	}
	t.free = append(t.free, s)
	return true
}

// cancelSender removes every timer of (a, instance), in heap order so
// that every applier removes them in the same order.
func (t *timerTable) cancelSender(a wire.Account, instance uint8) {
	for i := 0; i < len(t.heap); {
		k := t.list[t.heap[i]].key
		if k.account == a && k.instance == instance {
			t.cancel(k) // moves another timer to i (or shrinks the heap)
			i = 0       // the heap was reshuffled: start over
			continue
		}
		i++
	}
}

// fired applies the firing of timer k at time now: a periodic timer moves
// to its next period (nextFiring), a one-shot timer (or one whose next
// period is past the end of time) is removed; it reports a removal.
func (t *timerTable) fired(k timerKey, now int64) bool {
	s, ok := t.index[k]
	if !ok {
		return false
	}
	tm := &t.list[s]
	if tm.period > 0 {
		if at, ok := nextFiring(tm.at, tm.period, now); ok {
			tm.at = at
			t.fix(tm.pos)
			return false
		}
	}
	return t.cancel(k)
}

// nextFiring is the first period of a timer due at at that is after now.
// Periods missed while the sequencer was not ticking are coalesced into
// one firing, like a ticker, so a stalled clock cannot flood the stream.
// ok is false when that time is past the end of time.
func nextFiring(at, period, now int64) (int64, bool) {
	// In uint64 so that far-apart times cannot overflow: now-at < 2^64
	// always, and the step is whole periods.
	behind := uint64(0)
	if now > at {
		behind = uint64(now - at)
	}
	step := (behind/uint64(period) + 1) * uint64(period)
	if step <= behind || step > uint64(math.MaxInt64)-uint64(at) {
		return 0, false
	}
	return at + int64(step), true
}

// due returns the earliest timer if it is due at now.
func (t *timerTable) due(now int64) (*timer, bool) {
	if len(t.heap) == 0 {
		return nil, false
	}
	tm := &t.list[t.heap[0]]
	return tm, tm.at <= now
}

// sequenceTimer turns an accepted CmdTimer command (decoded into c.tr,
// checked by checkTimer) into an internal record that keeps the
// requester's account/instance/cmdSeq (so the node's ack logic is the
// same as for any command); applying it schedules or cancels the timer.
func (c *Core) sequenceTimer(k senderKey, cmdSeq uint64) {
	tr := &c.tr
	if tr.Cancel {
		c.in = wire.Internal{Type: wire.InternalTimerCancel, Account: k.account, Instance: k.instance, ID: tr.ID}
	} else {
		c.in = wire.Internal{Type: wire.InternalTimerSet, Account: k.account, Instance: k.instance, ID: tr.ID, Value: uint64(tr.At), Extra: tr.Period}
	}
	c.emitInternal(wire.FlagInternal, k.account, k.instance, cmdSeq)
	c.stats.Commands++
}

// checkTimer decodes a CmdTimer command into c.tr and returns why it
// must be rejected, or 0. idx is the sender's index (-1: unknown). The
// sender's timer rate comes from State (every member applies the same
// records), so a new primary judges the next request as this one would.
func (c *Core) checkTimer(cmd *wire.Command, idx int32) wire.RejectReason {
	tr := &c.tr
	if cmd.Flags&wire.CmdFragment != 0 {
		return wire.RejectFragmentedTimer
	}
	if wire.DecodeTimerRequest(cmd.Payload, tr) != nil {
		return wire.RejectTimerRequest
	}
	if tr.Cancel {
		return 0
	}
	if tr.Period != 0 && tr.Period < int64(c.cfg.MinTimerPeriod) {
		return wire.RejectTimerRequest
	}
	rate, limit := timerRate(tr.Period), uint64(c.cfg.MaxTimerFiresPerSecond)*1000
	if idx >= 0 {
		s := &c.state.senders.list[idx]
		k := timerKey{account: s.account, instance: s.instance, id: tr.ID}
		if int(s.timers) >= c.cfg.MaxTimersPerSender {
			if _, exists := c.state.timers.index[k]; !exists {
				return wire.RejectTimerCap
			}
		}
		rate += s.timerRate - c.state.timers.rateOf(k) // a timer replaced no longer counts
	}
	if rate > limit {
		return wire.RejectTimerRate
	}
	return 0
}

// fireTimers emits InternalTimer for every timer due at the current
// sequencer time, earliest first; applying each record reschedules or
// removes its timer (nextFiring). Periods missed while the sequencer was
// not ticking, or jumped over when the wall clock stepped forward, are
// coalesced into one firing and counted in TimerSkipped, so a clock step
// of a day cannot flood the stream with catch-up fires.
func (c *Core) fireTimers() {
	for !c.retainFull() {
		tm, due := c.state.timers.due(c.now)
		if !due {
			return
		}
		if tm.period > 0 {
			c.stats.TimerSkipped += uint64(c.now-tm.at) / uint64(tm.period)
		}
		c.in = wire.Internal{Type: wire.InternalTimer, Account: tm.key.account, Instance: tm.key.instance, ID: tm.key.id, Value: uint64(tm.at), Extra: tm.period}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		c.stats.TimersFired++
	}
}
