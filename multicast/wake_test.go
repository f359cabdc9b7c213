package multicast

import (
	"github.com/seqd/seqd/transport"
	"sync"
	"testing"
	"time"
)

// Many Wakes while nobody waits (Run busy handing frames to the core)
// write the eventfd once: the next Poll returns at once, the one after
// waits again; and a Wake is never lost, even racing with a Poll that is
// about to block.
func TestClient_WakesCoalesce(t *testing.T) {
	cfg := testConfig(t)
	_, cls := session(t, cfg, 1)
	cl := cls[0]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				cl.Wake()
			}
		}()
	}
	wg.Wait()
	if w := cl.poller.Writes(); w != 1 {
		t.Fatalf("4000 Wakes with no Poll wrote the eventfd %d times, want 1", w)
	}
	start := time.Now()
	if _, err := cl.Poll(ignoreFrame, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Poll(10s) after Wakes took %v: the wake was lost", d)
	}
	start = time.Now()
	if _, err := cl.Poll(ignoreFrame, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("second Poll(30ms) returned after %v: more than one wake-up for the coalesced Wakes", d)
	}

	// A Wake racing with a Poll that is about to block is never lost.
	for round := range 200 {
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			_, _ = cl.Poll(ignoreFrame, 10*time.Second)
			done <- time.Since(start)
		}()
		if round%2 == 0 {
			time.Sleep(time.Duration(round%7) * 50 * time.Microsecond)
		}
		cl.Wake()
		if d := <-done; d > 2*time.Second {
			t.Fatalf("round %d: Poll(10s) returned after %v, not soon after the Wake", round, d)
		}
	}
	if w := cl.poller.Writes(); w > 201 {
		t.Fatalf("%d eventfd writes for 201 wake-ups", w)
	}
}

func ignoreFrame([]byte, transport.Peer) {}
