package rewind

import (
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/wire"
)

// serveRewind serves s's rewinds with cfg on loopback, through wrap's
// listener when wrap is not nil (connections that die); the server closes
// when the test ends. It returns the server and its address.
func serveRewind(tb testing.TB, s *replayer.Store, cfg replayer.RewindConfig, wrap func(net.Listener) net.Listener) (*replayer.RewindServer, string) {
	tb.Helper()
	srv, err := replayer.NewRewindServer(s.Tip(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var ln net.Listener = l
	if wrap != nil {
		ln = wrap(l)
	}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return srv, l.Addr().String()
}

// rewindingNode is a read-only node of session whose live stream is idle
// at seq last (a heartbeat, then nothing), restarting from its snapshot
// of seq committed: every message it delivers to h comes by rewind. The
// caller names the replayers (SetRewindAddr) and runs it.
func rewindingNode(tb testing.TB, session, last, committed uint64, h node.Handler) *node.Node {
	tb.Helper()
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, session, last+1, last, 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	cl := &idleClient{hb: hb, wake: make(chan struct{}, 1), t: time.NewTimer(time.Hour)}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	cfg.Commit(committed)
	nd, err := node.New(cfg, h, cl)
	if err != nil {
		tb.Fatal(err)
	}
	return nd
}
