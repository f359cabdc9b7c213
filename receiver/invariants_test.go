package receiver

import (
	"strings"
	"testing"

	"github.com/seqd/seqd/internal/invariants"
)

// TestReceiver_AdvanceChecksInvariants: with invariants compiled in (-race
// or -tags invariants), Advance panics on positions that contradict each
// other, so every -race run of a shell or simulator checks them.
func TestReceiver_AdvanceChecksInvariants(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("invariants are compiled out (build with -race or -tags invariants)")
	}
	r := newTest(t, testConfig())
	r.Advance() // a fresh receiver is consistent
	r.released = r.next + 1
	defer func() {
		v := recover()
		if s, _ := v.(string); !strings.Contains(s, "released") {
			t.Fatalf("Advance with released beyond next: recovered %v, want a panic naming released", v)
		}
	}()
	r.Advance()
}
