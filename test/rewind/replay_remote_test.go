package rewind

import (
	"crypto/tls"
	"errors"
	"hash/crc32"
	"net"
	"runtime"
	"testing"

	"github.com/seqd/seqd/internal/tlsconf/tlstest"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
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

// TestReplayRemote_TLS: a replayer that serves rewinds over TLS replays
// to a client with a certificate of the CA (node.ReplayTLS) exactly what
// the archive holds; a plain client gets ErrRewind.
func TestReplayRemote_TLS(t *testing.T) {
	pkts := streamPackets(t, 2_000)
	dir := t.TempDir()
	s := openStore(t, dir)
	appendPackets(t, s, pkts)
	ca := tlstest.New(t, "site")
	srv := ca.Identity(t, "replayer-1")
	cfg := replayer.DefaultRewindConfig()
	_, addr := serveRewind(t, s, cfg, func(l net.Listener) net.Listener { return tls.NewListener(l, srv.Server(nil)) })
	var local, remote delivered
	if err := node.Replay(dir, 0, 0, &local); err != nil {
		t.Fatal(err)
	}
	if _, err := node.ReplayRemote(addr, 0, 0, &remote, node.ReplayTLS(ca.Identity(t, "admin-ops").Client(nil))); err != nil {
		t.Fatalf("ReplayRemote over TLS: %v", err)
	}
	if len(remote.got) == 0 || len(remote.got) != len(local.got) {
		t.Fatalf("over TLS: %d messages, the archive %d", len(remote.got)/3, len(local.got)/3)
	}
	for i := range local.got {
		if remote.got[i] != local.got[i] {
			t.Fatalf("message %d differs", i/3)
		}
	}
	if _, err := node.ReplayRemote(addr, 0, 0, &delivered{}); !errors.Is(err, node.ErrRewind) {
		t.Fatalf("plain client of a TLS replayer: %v, want ErrRewind", err)
	}
}
