package drill

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/internal/config"
)

// DefaultConfig is a valid drill; each bad count or profile is refused
// naming its field.
func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	soakOnly := DefaultConfig()
	soakOnly.Rounds, soakOnly.Soak = 0, 1
	if err := soakOnly.Validate(); err != nil {
		t.Fatalf("a soak with no rounds: %v", err)
	}
	for field, mutate := range map[string]func(*Config){
		"Rounds":        func(c *Config) { c.Rounds = 0 },
		"RatePerSecond": func(c *Config) { c.RatePerSecond = 0 },
		"Timeouts":      func(c *Config) { c.Timeouts = "lunar" },
	} {
		c := DefaultConfig()
		mutate(&c)
		var ce *config.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != field || !errors.Is(err, ErrConfig) {
			t.Errorf("bad %s: %v", field, err)
		}
	}
}
