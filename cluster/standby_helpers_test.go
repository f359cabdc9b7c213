package cluster

// The standby of the tests that run one in this package (its own tests
// are in cluster/standby; the stream and the client are standbytest's).

import (
	"testing"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/cluster/standby/standbytest"
	"github.com/seqd/seqd/transport"
)

func standbyConfig(t testing.TB, member uint64) standby.Config {
	cfg := standby.DefaultConfig()
	cfg.AckWritten = false // these tests were written against durable acks
	cfg.Member, cfg.Dir, cfg.MaxSenders, cfg.Session = member, t.TempDir(), 64, standbytest.Session
	cfg.Receiver.PendingRecords = 1 << 10
	cfg.Receiver.MaxReassemblyBytes = 1 << 20
	cfg.Receiver.MaxReceiveMessageBytes = 1 << 20
	cfg.Store.SegmentBytes = 64 << 20
	cfg.Fetch = Fetch
	return cfg
}

func newStandby(t testing.TB, cfg standby.Config, c transport.Client) *standby.Agent {
	t.Helper()
	s, err := standby.New(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
