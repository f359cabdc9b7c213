package sequencer

import (
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestCore_StatusOfAnAccountThatNeverSentCannotPauseTheStream: a sending
// node's report holds the stream back only when that account and
// instance have a command in the stream. Before, one forged status of an
// invented account, far behind, paused all sequencing for as long as it
// was repeated (issue 16).
func TestCore_StatusOfAnAccountThatNeverSentCannotPauseTheStream(t *testing.T) {
	c, _ := newCore(t, flowConfig())
	f := &flowFeed{c: c}
	f.send(t)
	forged := wire.MustAccount("forged")
	for i := 0; i < 400; i++ {
		if i%50 == 0 {
			f.status(t, forged, 0, 2, 7)
		}
		f.send(t)
	}
	if st := c.Stats(); st.FlowPaused != 0 {
		t.Fatalf("a status of an account that never sent paused the stream: %+v", st)
	}
	if lags := c.Receivers(nil); len(lags) != 1 || !lags[0].ReadOnly {
		t.Fatalf("Receivers = %+v, want the reporter kept as read-only", lags)
	}
}
