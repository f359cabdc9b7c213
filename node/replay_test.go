package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

const archiveSession = 0xa5c1

// archiveSink is what a replayer does with a sequencer's output: every
// data packet into a Store. It also keeps every frame published (data and
// heartbeats) for a live node to receive.
type archiveSink struct {
	t    testing.TB
	s    *replayer.Store
	live [][]byte
}

func (k *archiveSink) Publish(pkt []byte) {
	k.live = append(k.live, bytes.Clone(pkt))
	if kind, _ := wire.PeekKind(pkt); kind != wire.KindData {
		return
	}
	if err := k.s.Append(pkt); err != nil {
		k.t.Fatalf("store append: %v", err)
	}
}

func (k *archiveSink) SendTo(transport.Peer, []byte) {}

// archived is a session archive written by real sequencer Cores into a
// real Store, with the frames a live node received.
type archived struct {
	dir  string
	live [][]byte
	cut  uint64 // epoch 1 was cut here (0: one epoch)
	last uint64
}

// sender issues commands as a node would, one frame per batch.
type sender struct {
	acct wire.Account
	inst uint8
	next uint64
}

func (s *sender) frame(t testing.TB, sizes ...int) []byte {
	t.Helper()
	var w wire.CommandWriter
	buf := make([]byte, 64<<10)
	if err := w.Reset(buf, s.acct, s.inst, 1, archiveSession); err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		s.next++
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(s.next*7 + uint64(i) + uint64(s.acct))
		}
		if err := w.Append(&wire.Command{CmdSeq: s.next, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	return bytes.Clone(w.Bytes())
}

// smallSize: messages that fit a packet.
func smallSize(i int) int { return 16 + i%120 }

// mixedSize mixes small messages with some the stream fragments.
func mixedSize(i int) int {
	switch {
	case i%53 == 7:
		return 3000 + i%1000
	case i%11 == 0:
		return 700
	}
	return 16 + i%120
}

// writeArchive runs epoch 1 for n messages with stable lagging behind
// (standbys ack late), then a failover: epoch 2 starts at the stable seq
// of epoch 1 (the cut), so the archive holds epoch 1's records above the
// cut; epoch 2 sequences m more messages (with the resends of the cut
// commands) and makes them stable with a heartbeat the store never sees.
// With epochs false there is one epoch of n messages, stable as published.
func writeArchive(t testing.TB, n, m int, epochs bool, sizeOf func(int) int) *archived {
	t.Helper()
	dir := t.TempDir()
	scfg := replayer.DefaultConfig()
	scfg.Sync = replayer.SyncNone
	scfg.SegmentBytes = 256 << 10
	s, _, err := replayer.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &archiveSink{t: t, s: s}
	cfg := sequencer.DefaultConfig()
	cfg.Session = archiveSession
	cfg.Standalone = !epochs
	cfg.RingBytes = 1 << 20
	c, err := sequencer.NewSinkShell(cfg, k)
	if err != nil {
		t.Fatal(err)
	}
	alice := &sender{acct: wire.MustAccount("alice"), inst: 1}
	bob := &sender{acct: wire.MustAccount("bob")}
	clock := int64(1_700_000_000_000_000_000)
	step := func(c sequencer.SinkShell, f []byte, from transport.Peer) {
		clock += 1000
		if err := c.Step(sequencer.Time{Mono: clock, Wall: clock}, f, from); err != nil {
			t.Fatalf("sequencer step: %v", err)
		}
		c.Flush(sequencer.Time{Mono: clock, Wall: clock})
	}
	var sent [][]byte // alice's frames, for the resend after the failover
	for i := 0; i < n; i += 3 {
		f := alice.frame(t, sizeOf(i), sizeOf(i+1))
		sent = append(sent, f)
		step(c, f, 1)
		step(c, bob.frame(t, sizeOf(i+2)), 2)
		if epochs && c.Published() > 40 {
			c.SetStable(c.Published() - 40) // the quorum lags 40 seqs behind
			c.Tick(sequencer.Time{Mono: clock, Wall: clock})
		}
	}
	a := &archived{dir: dir}
	if epochs {
		a.cut = c.Stable()
		st := stateAt(t, cfg, k.live, a.cut)
		ncfg := cfg
		ncfg.Epoch, ncfg.FirstSeq, ncfg.StartTime = 2, a.cut+1, c.LastTime()
		c, err = sequencer.NewPrimarySinkShell(ncfg, k, sequencer.Takeover{State: st})
		if err != nil {
			t.Fatal(err)
		}
		// Alice resends what she has not seen acked: everything (the
		// new primary drops the ones sequenced before the cut).
		for _, f := range sent[len(sent)-30:] {
			step(c, f, 1)
		}
		for i := 0; i < m; i += 3 {
			step(c, alice.frame(t, sizeOf(i), sizeOf(i+1)), 1)
			step(c, bob.frame(t, sizeOf(i+2)), 2)
			if c.Published() > a.cut+40 {
				c.SetStable(c.Published() - 40)
			}
		}
		c.SetStable(c.Published())
		clock += int64(cfg.HeartbeatInterval)
		c.Tick(sequencer.Time{Mono: clock, Wall: clock}) // a heartbeat with the last stable
	}
	a.last = c.Published()
	a.live = k.live
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return a
}

// stateAt rebuilds the State of the stream up to seq cut, as a standby
// hands it to a new primary.
func stateAt(t testing.TB, cfg sequencer.Config, published [][]byte, cut uint64) *sequencer.State {
	t.Helper()
	st := sequencer.NewState(cfg.MaxSenders, 1)
	var p wire.Packet
	var r wire.Record
	for _, pkt := range published {
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatal(err)
		}
		for p.Next(&r) {
			if r.Seq > cut || r.Seq <= st.LastSeq() {
				continue
			}
			if err := st.Apply(&r); err != nil {
				t.Fatalf("apply seq %d: %v", r.Seq, err)
			}
		}
	}
	return st
}

// got is one delivered message as a user would check it.
type got struct {
	seq, cmdSeq uint64
	time        int64
	epoch       uint32
	account     wire.Account
	inst, flags uint8
	mine        bool
	payload     string
}

type replayRecorder struct{ msgs []got }

func (r *replayRecorder) OnMessage(m *Message) {
	r.msgs = append(r.msgs, got{m.Seq, m.CmdSeq, m.Time, m.Epoch, m.Account, m.Instance, m.Flags, m.Mine(), string(m.Payload)})
}

// liveDeliveries is what a read-only node of account alice/1 that
// received every published frame live delivered.
func liveDeliveries(t testing.TB, a *archived) []got {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ReadOnly, cfg.Account, cfg.Instance = true, "alice", 1
	cfg.Rewind = true
	rec := &replayRecorder{}
	c, err := NewCore(cfg, rec, &captureOut{})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range a.live {
		if err := c.Step(int64(i), f); err != nil {
			t.Fatalf("live step %d: %v", i, err)
		}
	}
	if c.Delivered() != a.last {
		t.Fatalf("the live node delivered up to %d of %d", c.Delivered(), a.last)
	}
	return rec.msgs
}

type captureOut struct{}

func (*captureOut) Send([]byte) {}

func sameDeliveries(t testing.TB, what string, replayed, live []got) {
	t.Helper()
	for i := range min(len(replayed), len(live)) {
		if replayed[i] != live[i] {
			r, l := replayed[i], live[i]
			r.payload, l.payload = fmt.Sprint(len(r.payload)), fmt.Sprint(len(l.payload))
			t.Fatalf("%s: message %d: replayed %+v, live %+v", what, i, r, l)
		}
	}
	if len(replayed) != len(live) {
		t.Fatalf("%s: %d messages replayed, %d live", what, len(replayed), len(live))
	}
}

// cutRecords counts the records of epoch 1 above the cut that the
// archive's files hold.
func cutRecords(t testing.TB, a *archived) int {
	t.Helper()
	s, _, err := replayer.OpenArchive(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	var p wire.Packet
	var r wire.Record
	segs, _ := filepath.Glob(filepath.Join(a.dir, "*.seg"))
	for _, path := range segs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := replayer.SegmentHeaderBytes; off+replayer.FrameHeaderBytes <= len(b); {
			l := int(uint32(b[off+4]) | uint32(b[off+5])<<8 | uint32(b[off+6])<<16 | uint32(b[off+7])<<24)
			pkt := b[off+replayer.FrameHeaderBytes : off+replayer.FrameHeaderBytes+l]
			if err := wire.DecodePacket(pkt, &p); err != nil {
				t.Fatal(err)
			}
			for p.Next(&r) {
				if p.Epoch == 1 && r.Seq > a.cut {
					n++
				}
			}
			off += replayer.FrameHeaderBytes + l
		}
	}
	return n
}

// TestReplay_SameAsLiveAcrossACutEpoch: an archive written by sequencer
// Cores into a Store across a failover whose old epoch has records above
// the cut replays, through the same Handler, exactly what a live node of
// the same account delivered: seqs, times, epochs, Mine, payloads, the
// fragments reassembled, the cut records never delivered.
func TestReplay_SameAsLiveAcrossACutEpoch(t *testing.T) {
	a := writeArchive(t, 3000, 3000, true, mixedSize)
	if n := cutRecords(t, a); n == 0 {
		t.Fatalf("the archive holds no record of epoch 1 above the cut %d", a.cut)
	}
	live := liveDeliveries(t, a)
	mine := 0
	for _, m := range live {
		if m.mine {
			mine++
		}
	}
	if mine == 0 || mine == len(live) {
		t.Fatalf("%d of %d messages are alice's", mine, len(live))
	}
	rec := &replayRecorder{}
	if err := Replay(a.dir, 1, 0, rec, ReplayAccount("alice", 1)); err != nil {
		t.Fatal(err)
	}
	sameDeliveries(t, "Replay(1, end)", rec.msgs, live)

	ar, err := OpenArchive(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	// A window around the cut, and one epoch's end.
	for _, w := range [][2]uint64{{a.cut - 30, a.cut + 30}, {1, a.cut}, {a.cut + 1, a.cut + 1}, {a.last - 5, a.last}} {
		rec := &replayRecorder{}
		st, err := ar.Replay(w[0], w[1], rec, ReplayAccount("alice", 1))
		if err != nil {
			t.Fatalf("Replay(%d, %d): %v", w[0], w[1], err)
		}
		sameDeliveries(t, fmt.Sprintf("Replay(%d, %d)", w[0], w[1]), rec.msgs, live[w[0]-1:w[1]])
		if st.Messages != w[1]-w[0]+1 || st.First != w[0] || st.Last != w[1] {
			t.Fatalf("Replay(%d, %d) stats %+v", w[0], w[1], st)
		}
	}
	// Stable only: the stored packets' stable, which lags.
	rec = &replayRecorder{}
	st, err := ar.Replay(1, 0, rec, ReplayStableOnly())
	if err != nil {
		t.Fatal(err)
	}
	if st.Last >= a.last || st.Last < a.last-100 {
		t.Fatalf("stable-only replay ended at %d (last %d)", st.Last, a.last)
	}
	// Without an account, nothing is Mine.
	for _, m := range rec.msgs {
		if m.mine {
			t.Fatalf("seq %d is Mine with no account", m.seq)
		}
	}
	// Out of range.
	if _, err := ar.Replay(a.last+1, 0, &replayRecorder{}); !errors.Is(err, ErrArchiveRange) {
		t.Fatalf("Replay past the end: %v", err)
	}
	if _, err := ar.Replay(a.last-1, a.last+10, &replayRecorder{}); !errors.Is(err, ErrArchiveRange) {
		t.Fatalf("Replay(to past the end): %v", err)
	}
}

// TestReplay_CorruptByteNamedNothingPast: a byte flipped in a stored
// packet stops the replay with an error naming the seq of the corrupt
// record; every message before it was delivered, none from it on.
func TestReplay_CorruptByteNamedNothingPast(t *testing.T) {
	a := writeArchive(t, 3000, 3000, true, mixedSize)
	live := liveDeliveries(t, a)
	segs, _ := filepath.Glob(filepath.Join(a.dir, "*.seg"))
	path := segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The third frame of the newest segment: its first seq is in the
	// frame header.
	off := replayer.SegmentHeaderBytes
	for range 2 {
		l := int(uint32(b[off+4]) | uint32(b[off+5])<<8 | uint32(b[off+6])<<16 | uint32(b[off+7])<<24)
		off += replayer.FrameHeaderBytes + l
	}
	var badSeq uint64
	for i := 7; i >= 0; i-- {
		badSeq = badSeq<<8 | uint64(b[off+8+i])
	}
	b[off+replayer.FrameHeaderBytes+80] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &replayRecorder{}
	err = Replay(a.dir, 1, 0, rec, ReplayAccount("alice", 1))
	if !errors.Is(err, replayer.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("seq %d", badSeq))) {
		t.Fatalf("Replay = %v, want ErrCorrupt naming seq %d", err, badSeq)
	}
	t.Log(err)
	sameDeliveries(t, "Replay up to the corruption", rec.msgs, live[:badSeq-1])
	// A range that ends before it replays.
	rec = &replayRecorder{}
	if err := Replay(a.dir, 1, badSeq-1, rec, ReplayAccount("alice", 1)); err != nil {
		t.Fatal(err)
	}
	sameDeliveries(t, "Replay before the corruption", rec.msgs, live[:badSeq-1])
}

// TestReplay_AllocatesNothingPerMessage: replaying ten times as many
// messages allocates no more. (A message fragmented over several packets
// costs a reassembly buffer in the receiver, live as in a replay.)
func TestReplay_AllocatesNothingPerMessage(t *testing.T) {
	a := writeArchive(t, 6000, 0, false, smallSize)
	ar, err := OpenArchive(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	h := &countHandler{}
	run := func(to uint64) float64 {
		return testing.AllocsPerRun(5, func() {
			if _, err := ar.Replay(1, to, h); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := run(a.last/10), run(a.last)
	t.Logf("allocations per replay: %v (%d messages), %v (%d messages)", small, a.last/10, large, a.last)
	if large > small {
		t.Fatalf("replaying %d messages allocates %v, %d messages %v: allocation per message", a.last, large, a.last/10, small)
	}
}

type countHandler struct{ n, bytes uint64 }

func (h *countHandler) OnMessage(m *Message) {
	h.n++
	h.bytes += uint64(len(m.Payload))
}

// BenchmarkReplay is the replay rate of an archive of 300k messages of
// 16..135 bytes (a standalone sequencer's stream, one command frame per
// packet as written by writeArchive) through a Handler that counts them.
func BenchmarkReplay(b *testing.B) {
	a := writeArchive(b, 300_000, 0, false, smallSize)
	ar, err := OpenArchive(a.dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ar.Close()
	h := &countHandler{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := ar.Replay(1, 0, h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(h.n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(h.n), "ns/msg")
}

// TestReplay_ArchiveStartingMidStream: an archive whose replayer started
// from the live tail holds seqs from K on; Replay from 0 starts there and
// delivers what a live node delivered from K, and a range before K fails
// naming what the archive holds.
func TestReplay_ArchiveStartingMidStream(t *testing.T) {
	a := writeArchive(t, 3000, 0, false, mixedSize)
	live := liveDeliveries(t, a)
	dir := t.TempDir()
	s, _, err := replayer.Open(dir, replayer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var p wire.Packet
	var r wire.Record
	var k uint64
	for _, f := range a.live {
		if kind, _ := wire.PeekKind(f); kind != wire.KindData {
			continue
		}
		if err := wire.DecodePacket(f, &p); err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			// The first packet past seq 1000 that starts a message.
			if p.FirstSeq <= 1000 || !p.Next(&r) || (r.Fragment() && r.Offset != 0) {
				continue
			}
			k = p.FirstSeq
		}
		if err := s.Append(f); err != nil {
			t.Fatalf("append seq %d: %v", p.FirstSeq, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := &replayRecorder{}
	if err := Replay(dir, 0, 0, rec, ReplayAccount("alice", 1)); err != nil {
		t.Fatal(err)
	}
	sameDeliveries(t, "Replay(0, end) of an archive from seq K", rec.msgs, live[k-1:])
	err = Replay(dir, 1, 0, &replayRecorder{})
	if !errors.Is(err, ErrArchiveRange) || !strings.Contains(err.Error(), fmt.Sprintf("holds seqs %d..%d", k, a.last)) {
		t.Fatalf("Replay(1, end) = %v, want ErrArchiveRange naming seqs %d..%d", err, k, a.last)
	}
}

// TestReplay_StableOnlyOfAReplayersArchiveReadsToItsEnd: a directory a
// replayer wrote (marked replayer.StableName: it stores only stable
// records) replays to its last record with ReplayStableOnly, though the
// stored headers' stable lags; it stopped at the last header's stable and
// dropped the session's last records. Unmarked (a standby's store), the
// headers' stable still bounds it.
func TestReplay_StableOnlyOfAReplayersArchiveReadsToItsEnd(t *testing.T) {
	a := writeArchive(t, 500, 500, true, smallSize)
	ar, err := OpenArchive(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	unmarked, err := ar.Replay(1, 0, &replayRecorder{}, ReplayStableOnly())
	ar.Close()
	if err != nil || unmarked.Last >= a.last {
		t.Fatalf("unmarked: ended at %d (last %d): %v", unmarked.Last, a.last, err)
	}
	if err := os.WriteFile(filepath.Join(a.dir, replayer.StableName), []byte("test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ar, err = OpenArchive(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	rec := &replayRecorder{}
	st, err := ar.Replay(1, 0, rec, ReplayStableOnly(), ReplayAccount("alice", 1))
	if err != nil || st.Last != a.last {
		t.Fatalf("marked: ended at %d, want the archive's last %d: %v", st.Last, a.last, err)
	}
	sameDeliveries(t, "stable-only of a replayer's archive", rec.msgs, liveDeliveries(t, a))
}
