package rewind

import (
	"errors"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/seqd/seqd/node"
)

// delivered records what a Handler got: seq, time and a CRC of the
// payload of every message, in order.
type delivered struct{ got []uint64 }

func (d *delivered) OnMessage(m *node.Message) {
	d.got = append(d.got, m.Seq, uint64(m.Time), uint64(crc32.ChecksumIEEE(m.Payload)))
}

// TestReplayRemote_EqualsArchiveReplay: node.ReplayRemote over a
// replayer's rewind server delivers exactly what node.Replay of the same
// store's directory does (fragments reassembled), for the whole stream
// and a range; a seq the replayer no longer holds is ErrArchiveRange
// naming what it holds, an address with no replayer ErrRewind.
func TestReplayRemote_EqualsArchiveReplay(t *testing.T) {
	pkts := streamPackets(t, 20_000)
	dir := t.TempDir()
	s := openStore(t, dir)
	appendPackets(t, s, pkts)
	addr := serveDying(t, s, 0)
	for _, r := range []struct{ from, to uint64 }{{0, 0}, {1, 0}, {4321, 9876}, {19_999, 0}, {50, 50}} {
		var local, remote delivered
		if err := node.Replay(dir, r.from, r.to, &local); err != nil {
			t.Fatalf("Replay %d..%d: %v", r.from, r.to, err)
		}
		st, err := node.ReplayRemote(addr, r.from, r.to, &remote)
		if err != nil {
			t.Fatalf("ReplayRemote %d..%d: %v", r.from, r.to, err)
		}
		if len(remote.got) != len(local.got) || st.Messages != uint64(len(local.got)/3) {
			t.Fatalf("%d..%d: remote delivered %d messages, the archive %d", r.from, r.to, len(remote.got)/3, len(local.got)/3)
		}
		for i := range local.got {
			if remote.got[i] != local.got[i] {
				t.Fatalf("%d..%d: message %d differs (seq %d)", r.from, r.to, i/3, local.got[i/3*3])
			}
		}
	}
	// Nothing more is allocated than for the local replay (its Core's
	// rings) but the connection: nothing per message.
	mallocs := func(f func()) uint64 {
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		f()
		runtime.ReadMemStats(&ms1)
		return ms1.Mallocs - ms0.Mallocs
	}
	h := &counter{want: -1}
	local := mallocs(func() {
		if err := node.Replay(dir, 0, 0, h); err != nil {
			t.Fatal(err)
		}
	})
	h = &counter{want: -1}
	var st node.ReplayStats
	var err error
	remote := mallocs(func() { st, err = node.ReplayRemote(addr, 0, 0, h) })
	if err != nil || h.err || st.Messages != 20_000 {
		t.Fatalf("ReplayRemote: %v, %d messages, gap %v", err, st.Messages, h.err)
	}
	if remote > local+1000 {
		t.Fatalf("ReplayRemote of %d messages made %d allocations, the archive's Replay %d", st.Messages, remote, local)
	}
	t.Logf("allocations for %d messages: remote %d, local %d", st.Messages, remote, local)
	if _, err := node.ReplayRemote(addr, 1, 30_000, &delivered{}); !errors.Is(err, node.ErrArchiveRange) {
		t.Fatalf("to past the tip: %v, want ErrArchiveRange", err)
	}
	if _, err := node.ReplayRemote(freeAddr(t), 1, 0, &delivered{}); !errors.Is(err, node.ErrRewind) {
		t.Fatalf("no replayer: %v, want ErrRewind", err)
	}
}
