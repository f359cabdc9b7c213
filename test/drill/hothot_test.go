package drill

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/config"
)

// TestHotHotDrill_ThreeRounds runs `seqd drill hothot --rounds 3` (a kill,
// a kill and a force-passive of the active instance) on real processes
// and real sockets: the pair are examples/inventory instances on SQLite;
// every buyer is answered once, every transaction replied to once, by the
// active instance, never oversold (the stock runs out midway), and both
// instances agree at every digest.
func TestHotHotDrill_ThreeRounds(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "seqd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/seqd/seqd/cmd/seqd").CombinedOutput(); err != nil {
		t.Fatalf("build seqd: %v\n%s", err, out)
	}
	cfg := DefaultHotHotConfig()
	cfg.Rounds, cfg.Pause, cfg.ActiveTimeout = 3, 300*time.Millisecond, 100*time.Millisecond
	cfg.Exe = bin
	cfg.Stock = 100 // sold out midway: buyers are refused too
	var out bytes.Buffer
	cfg.Out = &out
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := RunHotHot(ctx, cfg)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	last := regexp.MustCompile(`(?m)^drill hothot rounds=3 p50_ms=[0-9.]+ max_ms=[0-9.]+ lost=0 dup=0 oversold=0 diverged=0$`)
	if !last.Match(out.Bytes()) {
		t.Fatalf("no clean final line in:\n%s", out.String())
	}
}

// DefaultHotHotConfig is valid; each bad field is refused by name.
func TestHotHotConfig_Validate(t *testing.T) {
	if err := DefaultHotHotConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mutate := range map[string]func(*HotHotConfig){
		"Rounds":        func(c *HotHotConfig) { c.Rounds = 0 },
		"RatePerSecond": func(c *HotHotConfig) { c.RatePerSecond = 0 },
		"ActiveTimeout": func(c *HotHotConfig) { c.ActiveTimeout = time.Millisecond },
	} {
		c := DefaultHotHotConfig()
		mutate(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != field || !errors.Is(err, ErrConfig) {
			t.Errorf("bad %s: %v", field, err)
		}
	}
}
