package replayer

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

const testSession = 0x5e55

// stream builds packets as the sequencer does: whole messages batched
// into packets of at most maxPacket bytes, larger ones fragmented.
type stream struct {
	session    uint64
	epoch      uint32
	epochStart uint64
	maxPacket  int
	next       uint64
	w          wire.PacketWriter
	buf        []byte
	open       bool
	pkts       [][]byte
	// salt changes the payloads from here on: the messages of a new
	// epoch that restarts below the old one's tail differ from the ones
	// cut (see restartEpoch).
	salt byte
}

func newStream() *stream {
	return &stream{session: testSession, epoch: 1, epochStart: 1, maxPacket: 1472, next: 1}
}

// payload is the content of message seq: checkable anywhere.
func payload(seq uint64, size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(seq*31 + uint64(i)*7)
	}
	return p
}

func (st *stream) reset(first uint64) {
	st.buf = make([]byte, st.maxPacket)
	if err := st.w.Reset(st.buf, wire.KindData, st.epoch, st.session, first, 1000, st.epochStart); err != nil {
		panic(err)
	}
	st.open = true
}

func (st *stream) flush() {
	if st.open && st.w.Count() > 0 {
		st.pkts = append(st.pkts, append([]byte(nil), st.w.Bytes()...))
	}
	st.open = false
}

// msg adds message st.next of size bytes.
func (st *stream) msg(size int) {
	seq := st.next
	st.next++
	p := payload(seq, size)
	if st.salt != 0 {
		for i := range p {
			p[i] ^= st.salt
		}
	}
	if size <= st.maxPacket-wire.PacketHeaderBytes-wire.RecordHeaderBytes {
		if !st.open || st.w.Room() < size {
			st.flush()
			st.reset(seq)
		}
		if err := st.w.Append(&wire.Record{Payload: p, Time: 1000, Account: 7, CmdSeq: seq}); err != nil {
			panic(err)
		}
		return
	}
	for off := 0; off < size; {
		if !st.open || st.w.FragmentRoom() <= 0 {
			st.flush()
			st.reset(seq)
		}
		n := min(size-off, st.w.FragmentRoom())
		r := wire.Record{Flags: wire.FlagFragment, Total: uint32(size), Offset: uint32(off), Payload: p[off : off+n], Time: 1000, Account: 7, CmdSeq: seq}
		if err := st.w.Append(&r); err != nil {
			panic(err)
		}
		off += n
		if off < size {
			st.flush()
		}
	}
}

// newEpoch starts the next epoch at st.next.
func (st *stream) newEpoch() {
	st.flush()
	st.epoch++
	st.epochStart = st.next
}

// restartEpoch starts the next epoch at seq start, at or below the
// newest seq published: the old epoch's seqs from start on were cut by
// the failover (never stable), and the new primary publishes other
// messages with those seqs (their payloads salted with the epoch).
func (st *stream) restartEpoch(start uint64) {
	st.flush()
	st.epoch++
	st.epochStart = start
	st.next = start
	st.salt = byte(st.epoch) * 0x11
}

// mixed returns a stream of n messages of mixed sizes (some fragmented)
// across three epochs.
func mixed(n int) *stream {
	st := newStream()
	for i := 0; i < n; i++ {
		if i == n/3 || i == 2*n/3 {
			st.newEpoch()
		}
		switch {
		case i%97 == 5:
			st.msg(5000 + i%300) // fragmented over several packets
		case i%13 == 0:
			st.msg(900)
		default:
			st.msg(40 + i%200)
		}
	}
	st.flush()
	return st
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxPacketBytes = 1472
	cfg.SegmentBytes = 32 << 10
	cfg.WriteBufferBytes = 8 << 10
	cfg.ReadBufferBytes = 4 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.Sync = SyncNone
	return cfg
}

// onEachFS runs f as a subtest on each file system the store runs on:
// the disk (in a temporary directory) and a vfs.MemFS. cfg is
// testConfig() on that FS.
func onEachFS(t *testing.T, f func(t *testing.T, cfg Config, dir string)) {
	t.Run("fs=os", func(t *testing.T) {
		cfg := testConfig()
		cfg.FS = vfs.Default
		f(t, cfg, t.TempDir())
	})
	t.Run("fs=mem", func(t *testing.T) {
		cfg := testConfig()
		cfg.FS = vfs.NewMem()
		f(t, cfg, "/store")
	})
}

// segmentFiles lists the segment files in dir.
func segmentFiles(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, ok := parseSegmentName(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

func mustOpen(t testing.TB, dir string, cfg Config) (*Store, *Recovery) {
	t.Helper()
	s, rec, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Log(rec)
	return s, rec
}

func appendAll(t testing.TB, s *Store, pkts [][]byte) {
	t.Helper()
	for i, p := range pkts {
		if err := s.Append(p); err != nil {
			t.Fatalf("Append packet %d: %v", i, err)
		}
	}
}

// collect returns copies of the packets Range(from, to) hands out.
func collect(s *Store, from, to uint64) ([][]byte, []sequencer.PacketInfo) {
	var pkts [][]byte
	var infos []sequencer.PacketInfo
	s.Range(from, to, func(p []byte, info sequencer.PacketInfo) bool {
		pkts = append(pkts, append([]byte(nil), p...))
		infos = append(infos, info)
		return true
	})
	return pkts, infos
}

// expected is the brute-force answer: the packets that carry a record of
// from..to, in order.
func expected(pkts [][]byte, from, to uint64) [][]byte {
	var out [][]byte
	for _, p := range pkts {
		info := packetInfo(p)
		if info.LastSeq() >= from && info.FirstSeq <= to {
			out = append(out, p)
		}
	}
	return out
}

func samePackets(t testing.TB, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: packet %d (seq %d) differs from the one appended", what, i, packetInfo(want[i]).FirstSeq)
		}
	}
}

// lastSeq is the last seq in pkts.
func lastSeq(pkts [][]byte) uint64 {
	info := packetInfo(pkts[len(pkts)-1])
	return info.LastSeq()
}
