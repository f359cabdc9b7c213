package sequencer

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// readyCore is a bare Core (no SinkShell): the test reads its Ready.
func readyCore(t *testing.T, cfg Config) *Core {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dataOf copies the Data packets of c's Ready.
func dataOf(c *Core) [][]byte {
	var out [][]byte
	rd := c.Ready()
	for _, p := range rd.Packets {
		if p.Data {
			out = append(out, bytes.Clone(p.Bytes))
		}
	}
	return out
}

// The Core's output waits in Ready, call after call, until Advance; the
// Core never calls out.
func TestCore_ReadyAccumulatesUntilAdvance(t *testing.T) {
	cfg := testConfig()
	c := readyCore(t, cfg)
	if !c.HasReady() {
		c.Flush(at(1))
	}
	if err := c.Step(at(2), frame(t, acctA, 1, 0, cmd(1, "one")), 1); err != nil {
		t.Fatal(err)
	}
	c.Flush(at(2))
	if err := c.Step(at(3), frame(t, acctA, 1, 0, cmd(2, "two")), 1); err != nil {
		t.Fatal(err)
	}
	c.Flush(at(3))
	got := commands(decodeStream(t, dataOf(c), cfg.MaxPacketBytes))
	if len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("Ready holds commands %q, want [one two]", got)
	}
	c.Advance()
	if c.HasReady() {
		t.Fatalf("Ready after Advance: %+v", c.Ready())
	}
}

// Packets keep the order of publication (a heartbeat after the data
// packet before it); a NAK's answers are Replies, never Data.
func TestCore_ReadyOrder(t *testing.T) {
	cfg := testConfig()
	c := readyCore(t, cfg)
	c.Flush(at(1))
	c.Advance()
	if err := c.Step(at(2), frame(t, acctA, 1, 0, cmd(1, "x")), 1); err != nil {
		t.Fatal(err)
	}
	c.Flush(at(2))
	c.Tick(at(2 + int64(cfg.HeartbeatInterval)))
	rd := c.Ready()
	if len(rd.Packets) != 2 || !rd.Packets[0].Data || rd.Packets[1].Data {
		t.Fatalf("Ready: %d packets (data %v), want the data packet then a heartbeat", len(rd.Packets), datas(rd))
	}
	if k, _ := wire.PeekKind(rd.Packets[1].Bytes); k != wire.KindHeartbeat {
		t.Fatalf("second packet kind %v, want a heartbeat", k)
	}
	c.Advance()
	if err := c.Step(at(3), nakFrame(t, testSession, 1, 3, 0), 9); err != nil {
		t.Fatal(err)
	}
	rd = c.Ready()
	if len(rd.Packets) != 0 || len(rd.Replies) == 0 || rd.Replies[0].To != 9 {
		t.Fatalf("NAK's Ready: %d packets, replies %+v, want replies to peer 9 only", len(rd.Packets), rd.Replies)
	}
}

func datas(rd Ready) []bool {
	var out []bool
	for _, p := range rd.Packets {
		out = append(out, p.Data)
	}
	return out
}

// A repair patches a copy: a data packet still waiting in Ready (or in a
// transport) is not flagged a retransmit by a NAK that asks for it.
func TestCore_RepairLeavesPendingPacketsAlone(t *testing.T) {
	cfg := testConfig()
	c := readyCore(t, cfg)
	if err := c.Step(at(1), frame(t, acctA, 1, 0, cmd(1, "x")), 1); err != nil {
		t.Fatal(err)
	}
	c.Flush(at(1))
	before := dataOf(c)
	if err := c.Step(at(2), nakFrame(t, testSession, 1, c.Published(), 0), 9); err != nil {
		t.Fatal(err)
	}
	rd := c.Ready()
	if len(rd.Replies) == 0 {
		t.Fatal("the NAK got no answer")
	}
	for i, p := range dataOf(c) {
		if !bytes.Equal(p, before[i]) || wire.PacketFlags(p)&wire.PacketRetransmit != 0 {
			t.Fatalf("pending data packet %d changed by the repair", i)
		}
	}
	for _, r := range rd.Replies {
		if wire.PacketFlags(r.Bytes)&wire.PacketRetransmit == 0 {
			t.Fatal("a repair went without the retransmit flag")
		}
	}
}

// One call whose output is larger than the whole ring (a fragmented
// message in a ring of two packets) still hands every packet over: those
// the ring dropped on the way are copies, the stream is whole.
func TestCore_ReadyLargerThanTheRing(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 2 * cfg.MaxPacketBytes
	c := readyCore(t, cfg)
	big := bytes.Repeat([]byte("0123456789abcdef"), 2000) // 32 KB: ~23 packets
	frames := fragFrames(t, acctA, 1, big)
	for _, f := range frames {
		if err := c.Step(at(1), f, 1); err != nil {
			t.Fatal(err)
		}
	}
	c.Flush(at(1))
	ms := decodeStream(t, dataOf(c), cfg.MaxPacketBytes)
	if got := commands(ms); len(got) != 1 || got[0] != string(big) {
		t.Fatalf("stream holds %d commands, want the one of %d bytes", len(got), len(big))
	}
	if n := len(dataOf(c)); n < 10 {
		t.Fatalf("%d data packets: the ring did not wrap under the Ready", n)
	}
}

// A retaining Core marks its ring packets Retained, and a copy it had to
// make (none here) or a heartbeat not.
func TestCore_SetRetainedMarksDataPackets(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 1024
	cfg.RingBytes = RetainRingBytes(cfg, 8*cfg.MaxPacketBytes)
	c := readyCore(t, cfg)
	if !c.SetRetained(8 * cfg.MaxPacketBytes) {
		t.Fatal("SetRetained refused a ring of RetainRingBytes")
	}
	c.Flush(at(1))
	c.Tick(at(1 + int64(time.Second)))
	rd := c.Ready()
	for i, p := range rd.Packets {
		if p.Retained != p.Data {
			t.Fatalf("packet %d: data %v retained %v", i, p.Data, p.Retained)
		}
	}
	if c.SetRetained(cfg.RingBytes) {
		t.Fatal("SetRetained accepted a transport that holds the whole ring")
	}
}

// Handing a Ready to a transport and advancing allocates nothing.
func TestSendReady_AllocatesNothing(t *testing.T) {
	cfg := testConfig()
	c := readyCore(t, cfg)
	srv := nopServer{}
	f := newBatchFrame(t, 4, 64)
	_ = c.Step(at(0), f.next(), 1)
	SendReady(c, srv)
	now := int64(0)
	nak := nakFrame(t, testSession, 1, 3, 0)
	allocs := testing.AllocsPerRun(1000, func() {
		now++
		_ = c.Step(at(now), f.next(), 1)
		SendReady(c, srv)
		if now%8 == 0 {
			_ = c.Step(at(now), nak, 2)
			SendReady(c, srv)
			c.Tick(at(now + int64(time.Second)))
			SendReady(c, srv)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per call", allocs)
	}
}

type nopServer struct{}

func (nopServer) Publish([]byte) error                               { return nil }
func (nopServer) SendTo(transport.Peer, []byte) error                { return nil }
func (nopServer) Flush() error                                       { return nil }
func (nopServer) Poll(transport.Handler, time.Duration) (int, error) { return 0, nil }
func (nopServer) Close() error                                       { return nil }
