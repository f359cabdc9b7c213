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

// set schedules (or replaces) a timer.
func (t *timerTable) set(k timerKey, at, period int64) {
	if s, ok := t.index[k]; ok {
		tm := &t.list[s]
		tm.at, tm.period = at, period
		t.fix(tm.pos)
		return
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
}

// cancel removes a timer; unknown keys are fine (it may have fired).
func (t *timerTable) cancel(k timerKey) {
	s, ok := t.index[k]
	if !ok {
		return
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
}

// sequenceTimer sequences a CmdTimer command as an internal record that
// keeps the requester's account/instance/cmdSeq (so the node's ack logic is
// the same as for any command), then applies it.
func (c *Core) sequenceTimer(s *sender, cmd *wire.Command) {
	tr := &c.tr
	if err := wire.DecodeTimerRequest(cmd.Payload, tr); err != nil {
		panic("sequencer: timer request passed checkCommands but fails to decode: " + err.Error())
	}
	k := timerKey{account: s.account, instance: s.instance, id: tr.ID}
	if tr.Cancel {
		c.in = wire.Internal{Type: wire.InternalTimerCancel, Account: s.account, Instance: s.instance, ID: tr.ID}
		c.timers.cancel(k)
	} else {
		c.in = wire.Internal{Type: wire.InternalTimerSet, Account: s.account, Instance: s.instance, ID: tr.ID, Value: uint64(tr.At), Extra: tr.Period}
		c.timers.set(k, tr.At, tr.Period)
	}
	c.emitInternal(wire.FlagInternal, s.account, s.instance, cmd.CmdSeq)
	s.asm.clear()
	s.lastCmdSeq = cmd.CmdSeq
	c.stats.Commands++
}

// fireTimers emits InternalTimer for every timer due at the current
// sequencer time, earliest first. A periodic timer is rescheduled to its
// next period after now: periods missed while the sequencer was not
// ticking, or jumped over when the wall clock stepped forward, are
// coalesced into one firing (and counted in TimerSkipped), like a ticker,
// so a clock step of a day cannot flood the stream with catch-up fires.
func (c *Core) fireTimers() {
	t := &c.timers
	for len(t.heap) > 0 {
		s := t.heap[0]
		tm := &t.list[s]
		if tm.at > c.now {
			return
		}
		c.in = wire.Internal{Type: wire.InternalTimer, Account: tm.key.account, Instance: tm.key.instance, ID: tm.key.id, Value: uint64(tm.at), Extra: tm.period}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
		c.stats.TimersFired++
		if tm.period > 0 {
			// In uint64 so that far-apart times cannot overflow:
			// now-at < 2^64 always, and the step is whole periods.
			behind := uint64(c.now - tm.at)
			step := (behind/uint64(tm.period) + 1) * uint64(tm.period)
			if step <= behind || step > uint64(math.MaxInt64)-uint64(tm.at) {
				t.cancel(tm.key) // the next firing is past the end of time
				continue
			}
			tm.at += int64(step)
			c.stats.TimerSkipped += behind / uint64(tm.period)
			t.down(0)
		} else {
			t.cancel(tm.key)
		}
	}
}
