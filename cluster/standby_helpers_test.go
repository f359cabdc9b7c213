package cluster

// The set-ups of the tests that run a standby in this package (its own
// tests are in cluster/standby): a recorded stream, a standby on a
// temporary directory, a client that keeps what is sent.

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

const testSession = 9

var acctA = wire.MustAccount("alice")

// fakeClient is a transport.Client that keeps what is sent.
type fakeClient struct {
	mu   sync.Mutex
	sent [][]byte
	keep bool // copy sent frames (off for allocation tests)
	n    int
}

func (c *fakeClient) Send(f []byte) error {
	c.mu.Lock()
	c.n++
	if c.keep {
		c.sent = append(c.sent, bytes.Clone(f))
	}
	c.mu.Unlock()
	return nil
}
func (c *fakeClient) Flush() error { return nil }
func (c *fakeClient) Poll(transport.Handler, time.Duration) (int, error) {
	return 0, nil
}
func (c *fakeClient) Close() error { return nil }

// acks returns the standby acks sent so far.
func (c *fakeClient) acks(t testing.TB) []wire.Status {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wire.Status
	for _, f := range c.sent {
		var st wire.Status
		if k, _ := wire.PeekKind(f); k == wire.KindStatus {
			if err := wire.DecodeStatus(f, &st); err != nil {
				t.Fatal(err)
			}
			if st.Flags&wire.StatusStandby != 0 {
				out = append(out, st)
			}
		}
	}
	return out
}

// stream is a primary Core whose data packets are kept.
type stream struct {
	core   *sequencer.Core
	pkts   [][]byte
	cmdSeq uint64
	now    int64
}

func (s *stream) Publish(p []byte) {
	if k, _ := wire.PeekKind(p); k == wire.KindData {
		s.pkts = append(s.pkts, bytes.Clone(p))
	}
}
func (s *stream) SendTo(transport.Peer, []byte) {}

func seqConfig(epoch uint32, first uint64) sequencer.Config {
	cfg := sequencer.DefaultConfig()
	cfg.Session, cfg.Epoch, cfg.FirstSeq, cfg.Standalone = testSession, epoch, first, false
	cfg.RingBytes = 1 << 20
	cfg.MaxSenders = 64
	return cfg
}

func newStream(t testing.TB) *stream {
	t.Helper()
	s := &stream{}
	c, err := sequencer.New(seqConfig(1, 1), s)
	if err != nil {
		t.Fatal(err)
	}
	s.core = c
	return s
}

// commands sequences n commands of alice, one packet each, and returns
// the new packets.
func (s *stream) commands(t testing.TB, n int) [][]byte {
	t.Helper()
	before := len(s.pkts)
	for range n {
		s.cmdSeq++
		s.now += 1000
		if err := s.core.Step(sequencer.Time{Mono: s.now, Wall: s.now}, cmdFrame(t, s.cmdSeq, "x"), 1); err != nil {
			t.Fatal(err)
		}
		s.core.Flush(sequencer.Time{Mono: s.now, Wall: s.now})
	}
	return s.pkts[before:]
}

func cmdFrame(t testing.TB, seq uint64, payload string) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 512), acctA, 1, 0, testSession); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Command{CmdSeq: seq, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(w.Bytes())
}

func standbyConfig(t testing.TB, member uint64) standby.Config {
	cfg := standby.DefaultConfig()
	cfg.Member, cfg.Dir, cfg.MaxSenders, cfg.Session = member, t.TempDir(), 64, testSession
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

// referenceState applies the records of pkts up to seq last to a fresh
// State: what every applier must hold at last.
func referenceState(t testing.TB, pkts [][]byte, last uint64) *sequencer.State {
	t.Helper()
	st := sequencer.NewState(64, 1)
	var p wire.Packet
	var r wire.Record
	for _, b := range pkts {
		if err := wire.DecodePacket(b, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Seq == st.LastSeq()+1 && r.Seq <= last {
				if err := st.Apply(&r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if st.LastSeq() != last {
		t.Fatalf("reference state reached %d, want %d", st.LastSeq(), last)
	}
	return st
}
