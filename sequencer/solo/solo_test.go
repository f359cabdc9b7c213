package solo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/open"
	"github.com/seqd/seqd/transport/tcp"
)

// TestRun_StoppedDuringStartup: a context that ends before the sequencer
// serves ends Run with nil and the stopped line, as a stop while serving
// does (scripts wait for that line).
func TestRun_StoppedDuringStartup(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sequencer.Session, cfg.Sequencer.Epoch = 1, 1
	cfg.Transport = open.Config{Transport: open.TCP, TCP: tcp.DefaultConfig()}
	var out bytes.Buffer
	cfg.Out = &out
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, cfg); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if !strings.HasPrefix(out.String(), "sequencer: stopped last_seq=0 ") {
		t.Fatalf("output %q, want the stopped line", out.String())
	}
}

// TestConfig_Validate names the bad field.
func TestConfig_Validate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sequencer.Session, cfg.Sequencer.Epoch = 1, 1
	cfg.Transport = open.Config{Transport: open.TCP, TCP: tcp.DefaultConfig()}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate = %v, want nil", err)
	}
	cfg.ListenBeforeStart = -time.Second
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ListenBeforeStart") {
		t.Fatalf("Validate = %v, want ErrConfig naming ListenBeforeStart", err)
	}
}
