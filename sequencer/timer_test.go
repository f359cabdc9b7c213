package sequencer

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// firing is an InternalTimer as seen in the stream.
type firing struct {
	ID        uint64
	Scheduled int64 // Value
	At        int64 // record time
}

func timerFirings(ms []msg) []firing {
	var out []firing
	for _, m := range ms {
		if m.Internal != nil && m.Internal.Type == wire.InternalTimer {
			out = append(out, firing{m.Internal.ID, int64(m.Internal.Value), m.Time})
		}
	}
	return out
}

func TestCore_Timers(t *testing.T) {
	ms := int64(time.Millisecond)
	type req struct {
		at  int64 // when the command arrives
		req wire.TimerRequest
	}
	tests := []struct {
		name  string
		reqs  []req
		ticks []int64
		want  []firing
	}{
		{
			name:  "one shot fires at sequencer time",
			reqs:  []req{{0, wire.TimerRequest{ID: 1, At: 5 * ms}}},
			ticks: []int64{4 * ms, 6 * ms, 20 * ms},
			want:  []firing{{1, 5 * ms, 6 * ms}},
		},
		{
			name:  "periodic",
			reqs:  []req{{0, wire.TimerRequest{ID: 2, At: 3 * ms, Period: 2 * ms}}},
			ticks: []int64{3 * ms, 4 * ms, 5 * ms, 7 * ms, 8 * ms},
			want:  []firing{{2, 3 * ms, 3 * ms}, {2, 5 * ms, 5 * ms}, {2, 7 * ms, 7 * ms}},
		},
		{
			name:  "missed periods coalesce",
			reqs:  []req{{0, wire.TimerRequest{ID: 2, At: 1 * ms, Period: 1 * ms}}},
			ticks: []int64{1 * ms, 10*ms + 1, 11 * ms},
			want:  []firing{{2, 1 * ms, 1 * ms}, {2, 2 * ms, 10*ms + 1}, {2, 11 * ms, 11 * ms}},
		},
		{
			name: "cancel",
			reqs: []req{
				{0, wire.TimerRequest{ID: 3, At: 4 * ms, Period: ms}},
				{ms, wire.TimerRequest{ID: 3, Cancel: true}},
			},
			ticks: []int64{2 * ms, 10 * ms},
			want:  nil,
		},
		{
			name: "cancel a periodic timer after it fired",
			reqs: []req{
				{0, wire.TimerRequest{ID: 3, At: ms, Period: ms}},
				{2*ms + 1, wire.TimerRequest{ID: 3, Cancel: true}},
			},
			ticks: []int64{ms, 2 * ms, 3 * ms, 10 * ms},
			want:  []firing{{3, ms, ms}, {3, 2 * ms, 2 * ms}},
		},
		{
			name: "same id replaces",
			reqs: []req{
				{0, wire.TimerRequest{ID: 4, At: 2 * ms}},
				{ms, wire.TimerRequest{ID: 4, At: 5 * ms}},
			},
			ticks: []int64{3 * ms, 6 * ms},
			want:  []firing{{4, 5 * ms, 6 * ms}},
		},
		{
			name: "due together fire by id",
			reqs: []req{
				{0, wire.TimerRequest{ID: 9, At: 2 * ms}},
				{0, wire.TimerRequest{ID: 5, At: 2 * ms}},
				{0, wire.TimerRequest{ID: 7, At: ms}},
			},
			ticks: []int64{3 * ms},
			want:  []firing{{7, ms, 3 * ms}, {5, 2 * ms, 3 * ms}, {9, 2 * ms, 3 * ms}},
		},
		{
			name:  "in the past fires at the next tick",
			reqs:  []req{{5 * ms, wire.TimerRequest{ID: 1, At: ms}}},
			ticks: []int64{5 * ms},
			want:  []firing{{1, ms, 5 * ms}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			c, sink := newCore(t, cfg)
			ri, ti := 0, 0
			// Interleave commands and ticks by time, commands first on ties.
			for ri < len(tt.reqs) || ti < len(tt.ticks) {
				if ri < len(tt.reqs) && (ti == len(tt.ticks) || tt.reqs[ri].at <= tt.ticks[ti]) {
					r := tt.reqs[ri]
					mustStep(t, c, r.at, frame(t, acctA, 1, 0, timerCmd(t, uint64(ri+1), r.req)))
					c.Flush(at(r.at))
					ri++
					continue
				}
				c.Tick(at(tt.ticks[ti]))
				ti++
			}
			got := timerFirings(decodeStream(t, sink.published, cfg.MaxPacketBytes))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("firings %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCore_TimerRecords checks the set/cancel/fire records' headers: the
// requests keep the requester's identity so the node sees its ack.
func TestCore_TimerRecords(t *testing.T) {
	cfg := testConfig()
	cfg.MinTimerPeriod = 0 // periods of nanoseconds
	cfg.MaxTimerFiresPerSecond = maxTimerFiresPerSecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 0, frame(t, acctB, 4, 0, timerCmd(t, 1, wire.TimerRequest{ID: 11, At: 100, Period: 50}), timerCmd(t, 2, wire.TimerRequest{ID: 12, Cancel: true})))
	c.Tick(at(100))
	var got []string
	for _, m := range decodeStream(t, sink.published, 1472) {
		if m.Internal == nil || m.Internal.Type < wire.InternalTimer || m.Internal.Type == wire.InternalIncarnation {
			continue
		}
		in := m.Internal
		got = append(got, fmt.Sprintf("%v flags=%d hdr=%v/%d/%d payload=%v/%d id=%d v=%d x=%d",
			in.Type, m.Flags, m.Account, m.Instance, m.CmdSeq, in.Account, in.Instance, in.ID, in.Value, in.Extra))
	}
	want := []string{
		"timer-set flags=1 hdr=bob/4/1 payload=bob/4 id=11 v=100 x=50",
		"timer-cancel flags=1 hdr=bob/4/2 payload=bob/4 id=12 v=0 x=0",
		"timer flags=5 hdr=/0/0 payload=bob/4 id=11 v=100 x=50",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("records\n%s\nwant\n%s", got, want)
	}
	if st := c.Stats(); st.Commands != 2 || st.TimersFired != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCore_Activation(t *testing.T) {
	ms := int64(time.Millisecond)
	type ev struct {
		at       int64
		account  wire.Account
		instance uint8
		tick     bool
	}
	tests := []struct {
		name    string
		timeout time.Duration
		events  []ev
		want    []string
	}{
		{
			name: "first instance of each account activated before its first message",
			events: []ev{
				{at: 0, account: acctA, instance: 1},
				{at: 0, account: acctA, instance: 2},
				{at: 0, account: acctB, instance: 7},
				{at: 100 * ms, tick: true},
			},
			want: []string{"node-activated alice/1", "cmd alice/1", "cmd alice/2", "node-activated bob/7", "cmd bob/7"},
		},
		{
			name:    "silent active instance replaced by a live one",
			timeout: 10 * time.Millisecond,
			events: []ev{
				{at: 0, account: acctA, instance: 1},
				{at: 5 * ms, account: acctA, instance: 2},
				{at: 9 * ms, tick: true},
				{at: 12 * ms, account: acctA, instance: 2},
				{at: 12 * ms, tick: true},
				{at: 13 * ms, tick: true},
			},
			want: []string{"node-activated alice/1", "cmd alice/1", "cmd alice/2", "cmd alice/2",
				"node-deactivated alice/1", "node-activated alice/2"},
		},
		{
			name:    "no switch when no other instance is live",
			timeout: 10 * time.Millisecond,
			events: []ev{
				{at: 0, account: acctA, instance: 1},
				{at: 1 * ms, account: acctA, instance: 2},
				{at: 30 * ms, tick: true},
			},
			want: []string{"node-activated alice/1", "cmd alice/1", "cmd alice/2"},
		},
		{
			name:    "timeout 0 never switches",
			timeout: 0,
			events: []ev{
				{at: 0, account: acctA, instance: 1},
				{at: 50 * ms, account: acctA, instance: 2},
				{at: 50 * ms, tick: true},
			},
			want: []string{"node-activated alice/1", "cmd alice/1", "cmd alice/2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ActiveTimeout = tt.timeout
			c, sink := newCore(t, cfg)
			next := map[[2]uint64]uint64{}
			for _, e := range tt.events {
				if e.tick {
					c.Tick(at(e.at))
					continue
				}
				k := [2]uint64{uint64(e.account), uint64(e.instance)}
				next[k]++
				mustStep(t, c, e.at, frame(t, e.account, e.instance, 0, cmd(next[k], "x")))
				c.Flush(at(e.at))
			}
			var got []string
			for _, m := range decodeStream(t, sink.published, cfg.MaxPacketBytes) {
				switch {
				case m.Internal == nil:
					got = append(got, fmt.Sprintf("cmd %v/%d", m.Account, m.Instance))
				case m.Internal.Type == wire.InternalNodeActivated || m.Internal.Type == wire.InternalNodeDeactivated:
					got = append(got, fmt.Sprintf("%v %v/%d", m.Internal.Type, m.Internal.Account, m.Internal.Instance))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("stream\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestCore_TimerFarTimes checks times near the ends of int64: a periodic
// timer far in the past fires once and one whose next period would pass
// the end of time is dropped, instead of looping or wrapping.
func TestCore_TimerFarTimes(t *testing.T) {
	cfg := testConfig()
	cfg.MinTimerPeriod = 0 // periods of nanoseconds
	cfg.MaxTimerFiresPerSecond = maxTimerFiresPerSecond
	c, sink := newCore(t, cfg)
	mustStep(t, c, 100, frame(t, acctA, 1, 0,
		timerCmd(t, 1, wire.TimerRequest{ID: 1, At: math.MinInt64 + 5, Period: 3}),
		timerCmd(t, 2, wire.TimerRequest{ID: 2, At: math.MaxInt64 - 10, Period: math.MaxInt64})))
	c.Tick(at(1000))
	c.Tick(at(math.MaxInt64 - 5))
	c.Tick(at(math.MaxInt64))
	c.Tick(at(math.MaxInt64))
	want := []firing{
		{1, math.MinInt64 + 5, 1000},
		{1, 1002, math.MaxInt64 - 5},
		{2, math.MaxInt64 - 10, math.MaxInt64 - 5},
		{1, math.MaxInt64 - 4, math.MaxInt64}, // the last period before the end of time
	}
	if got := timerFirings(decodeStream(t, sink.published, 1472)); !slices.Equal(got, want) {
		t.Fatalf("firings %v, want %v", got, want)
	}
	if len(c.state.timers.heap) != 0 || len(c.state.timers.index) != 0 {
		t.Fatalf("%d timers still scheduled", len(c.state.timers.heap))
	}
}
