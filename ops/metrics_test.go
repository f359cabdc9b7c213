package ops

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seqd/seqd/bridge"
	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// TestMetrics_Lint: every collector's metrics pass Prometheus's own
// naming and help checks (promtool's linter).
func TestMetrics_Lint(t *testing.T) {
	f := &fakeMember{status: MemberStatus{ID: 1, Role: "primary", RaftState: "Leader", Change: &Change{Epoch: 2, StartedUS: 10}}}
	for name, c := range map[string]prometheus.Collector{
		"member":    NewMemberCollector(f),
		"sequencer": NewSequencerCollector(func() sequencer.Stats { return sequencer.Stats{Commands: 3} }),
		"transport": NewTransportCollector("stream", func() transport.Counters { return transport.Counters{BytesSent: 9} }),
		"node":      NewNodeCollector(func() NodeSnap { return NodeSnap{} }),
		"replayer":  NewReplayerCollector(func() ReplayerSnap { return ReplayerSnap{} }),
		"standby":   NewStandbyCollector(func() (standby.Stats, bool) { return standby.Stats{}, false }),
		"bridge receive": newBridgeCollector([]string{"tcp 127.0.0.1:1", "udp 127.0.0.1:2"}, func() BridgeSnap {
			return BridgeSnap{Receive: &bridge.ReceiveStats{Channels: make([]bridge.ChannelStats, 2), Delivered: 4}}
		}),
		"bridge send": newBridgeCollector(nil, func() BridgeSnap { return BridgeSnap{Send: &bridge.SendStats{UDPPackets: 3}} }),
	} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := reg.Gather(); err != nil {
			t.Errorf("%s: gather: %v", name, err)
		}
	}
}
