package main

import (
	"testing"

	"github.com/seqd/seqd/sequencer"
)

// TestDefaults_FlowWindowFitsTheNodesSocketBuffer: with the defaults the
// stream never runs further ahead of a sending node than its socket
// buffer holds, so a descheduled node loses nothing to the kernel (at the
// old 50% the window was 128 MiB against a 32 MiB buffer).
func TestDefaults_FlowWindowFitsTheNodesSocketBuffer(t *testing.T) {
	d := sequencer.DefaultConfig()
	window := d.RingBytes / 100 * d.FlowWindowPercent
	if window <= 0 || window > cliReadBufferBytes {
		t.Fatalf("flow window %d B (%d%% of %d), socket buffer %d B: want 0 < window <= buffer",
			window, d.FlowWindowPercent, d.RingBytes, cliReadBufferBytes)
	}
}
