//go:build !race

package drill

import (
	"strings"
	"testing"
	"time"
)

// Site A as a group of three: a SIGKILL of its primary mid-run, and B
// follows the new epoch with the same stream (`make integration`; not
// under -race, where a group of three and two sites load two cores too
// much for the timings).
func TestRunBridge_PrimaryKilledAtTheOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("a group of three and a bridge: seconds of processes")
	}
	cfg := DefaultBridgeConfig()
	cfg.Rounds, cfg.Sequencers, cfg.RatePerSecond, cfg.Cut, cfg.Pause = 6, 3, 500, 300*time.Millisecond, 300*time.Millisecond
	cfg.Faults = "loss=0.05,seed=9"
	out := runBridgeDrill(t, cfg, 3*time.Minute)
	if !strings.Contains(out, "cut=kill-primary") {
		t.Fatal("no primary was killed")
	}
}
