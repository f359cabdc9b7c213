package cluster

import (
	"errors"
	"testing"
)

// The one default of a member's ack mode is `seqd sequencer --cluster`'s:
// standbys ack what they wrote; a Process needs both of its openers.
func TestProcess_DefaultsAndOpens(t *testing.T) {
	if !DefaultDataConfig().AckWritten {
		t.Fatal("DefaultDataConfig acks durable, want written (the CLI's --standby.ack default)")
	}
	if _, err := NewProcess(DefaultMemberConfig(), DefaultDataConfig(), Opens{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewProcess without openers = %v, want ErrConfig", err)
	}
}
