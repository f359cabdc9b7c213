package replayer

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// TestService_ForeignSessionDoesNotStopAReplayerWhoseSessionPublishes: a
// replayer restarted on its store whose first packet is another
// session's (a forged heartbeat) goes on with its own session's stream;
// only when its session sends nothing for SessionTimeout while the other
// publishes does it stop with ErrSession, as before. Before, the first
// forged packet stopped it.
func TestService_ForeignSessionDoesNotStopAReplayerWhoseSessionPublishes(t *testing.T) {
	for _, ownLive := range []bool{true, false} {
		st := mixed(400)
		dir := t.TempDir()
		s0, _ := mustOpen(t, dir, testConfig())
		half := len(st.pkts) / 2
		for packetInfo(st.pkts[half]).Fragment {
			half++
		}
		appendAll(t, s0, st.pkts[:half])
		s0.Close()

		follow, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		naks, err := mem.NewNetwork(mem.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		var mono int64
		cfg := DefaultServiceConfig()
		cfg.Store = testConfig()
		cfg.Dir = dir
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg.Clock = func() int64 { return mono }
		s, err := NewService(cfg, follow.Client(), naks.Server())
		if err != nil {
			t.Fatal(err)
		}
		forged, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, testSession+1, 1, 0, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		ms := int64(time.Millisecond)
		for i := 0; i < 150; i++ {
			mono = int64(i+1) * 10 * ms
			s.stream(forged, 0)
			if ownLive { // then the last packet again: its session stays live
				s.stream(st.pkts[min(half+i, len(st.pkts)-1)], 0)
			}
			if s.err != nil {
				break
			}
		}
		if ownLive {
			if s.err != nil || s.r.Session() != testSession {
				t.Fatalf("own session live: err %v, following session %d", s.err, s.r.Session())
			}
		} else if !errors.Is(s.err, ErrSession) {
			t.Fatalf("own session silent for %dms: err %v, want ErrSession", mono/ms, s.err)
		}
		s.store.Close()
	}
}
