package solo

import (
	"context"
	"testing"
	"time"
)

// TestListenForSession_NoClientReturnsAtOnce: over TCP with no sequencer
// listening there is no client to poll; the probe must not wait out its
// window (it spun on the clock for it, a core's worth of CPU). With a
// window of an hour the old loop hangs until the test times out.
func TestListenForSession_NoClientReturnsAtOnce(t *testing.T) {
	live, err := listenForSession(context.Background(), nil, nil, time.Hour)
	if err != nil || live != nil {
		t.Fatalf("listenForSession() = %v, %v; want nil, nil", live, err)
	}
}
