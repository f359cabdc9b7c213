package demo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A demo of two sequencers is refused; one sequencer over the lossy
// in-memory network delivers the same stream to every node.
func TestRun_OneSequencerAndABadCount(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sequencers = 2
	if err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("Sequencers 2: %v, want ErrConfig", err)
	}
	cfg = DefaultConfig()
	cfg.Sequencers, cfg.CommandsPerNode = 1, 300
	var out strings.Builder
	cfg.Out = &out
	defer func() { t.Log(out.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, cfg); err != nil || !strings.Contains(out.String(), "demo: ok ") {
		t.Fatalf("one sequencer: %v", err)
	}
}
