package main

import (
	"errors"
	"testing"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/sequencer"
)

// TestConfigError_NamesTheKeyOfTheFieldAtFault: a package's config.Error
// is reported on the configuration key of its field, found with
// errors.As, even when the message mentions another field that has a key
// too ("MaxReassemblyBytes = ..., want >= MaxMessageBytes").
func TestConfigError_NamesTheKeyOfTheFieldAtFault(t *testing.T) {
	seq := sequencer.DefaultConfig()
	seq.Session = 1
	seq.MaxReassemblyBytes = seq.MaxMessageBytes - 1
	nd := node.DefaultConfig()
	nd.Account = "A"
	nd.MaxResendInterval = nd.MinResendInterval / 2
	hb := seq
	hb.MaxReassemblyBytes = sequencer.DefaultConfig().MaxReassemblyBytes
	hb.HeartbeatInterval = 0
	mc := multicast.DefaultConfig()
	mc.StreamGroup = "10.0.0.1:9100"
	for _, tc := range []struct {
		err  error
		keys map[string]string
		key  string
	}{
		{seq.Validate(), sequencerKeys, "sequencer.max-reassembly-bytes"},
		{hb.Validate(), sequencerKeys, "sequencer.heartbeat-interval"},
		{nd.Validate(), nodeKeys, "node.max-resend-interval"},
		{mc.Validate(), transportKeys, "udp.stream-group"},
		{options.OneOf("node.mode", "turbo", "safe", "fast"), nil, "node.mode"},
	} {
		err := tc.err
		if tc.keys != nil {
			err = options.Keyed(err, tc.keys)
		}
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != tc.key || !errors.Is(err, options.ErrConfig) {
			t.Errorf("%v: reported on %q, want key %s", err, fieldOf(ce), tc.key)
		}
	}
}

func fieldOf(ce *config.Error) string {
	if ce == nil {
		return "<no config.Error>"
	}
	return ce.Field
}
