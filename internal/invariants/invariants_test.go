package invariants_test

import (
	"testing"

	"github.com/seqd/seqd/internal/invariants"
)

// TestEnabled_FollowsTheBuild: the test binary's own build says what
// Enabled must be (race is the detector, tagged is -tags invariants).
func TestEnabled_FollowsTheBuild(t *testing.T) {
	if want := raceBuild || taggedBuild; invariants.Enabled != want {
		t.Fatalf("Enabled = %v in a build with race=%v, invariants tag=%v", invariants.Enabled, raceBuild, taggedBuild)
	}
}
