package sequencer

import (
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestCore_StaleIncarnationIsToldToTheSender: frames of an incarnation
// older than the one on record are dropped (old resends never slip
// through) but not in silence: an InternalStaleIncarnation record names
// the incarnation on record (Value) and the stale one (Extra), at most
// once per staleTellInterval however fast the frames come, and it
// changes no state (issue 14, item 9).
func TestCore_StaleIncarnationIsToldToTheSender(t *testing.T) {
	c, sink := newCore(t, testConfig())
	mustStep(t, c, 1, frame(t, acctA, 1, 100, cmd(1, "old life")))
	ms := int64(time.Millisecond)
	for i := int64(0); i < 250; i++ { // a resend every ms for 250ms
		mustStep(t, c, 2+i*ms, frame(t, acctA, 1, 50, cmd(1, "new life")))
	}
	c.Flush(at(300 * ms))
	var told []wire.Internal
	for _, m := range decodeStream(t, sink.published, 1472) {
		if m.Internal != nil && m.Internal.Type == wire.InternalStaleIncarnation {
			told = append(told, *m.Internal)
		}
	}
	if len(told) != 3 || told[0].Account != acctA || told[0].Instance != 1 || told[0].Value != 100 || told[0].Extra != 50 {
		t.Fatalf("told %+v, want 3 (at 0, 100 and 200ms) of value 100 extra 50", told)
	}
	if st := c.Stats(); st.StaleFrames != 250 || st.StaleTold != 3 || st.Commands != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st := c.State(); st.Senders() != 1 {
		t.Fatalf("%d senders", st.Senders())
	}
}
