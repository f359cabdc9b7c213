package tcp

import (
	"bytes"
	"testing"
)

// With its writer idle, a Flush writes the frames to the socket itself
// before it returns (no hand-off to the writer goroutine, which cost a
// round trip two wake-ups); the bytes then reach the peer intact and in
// order, on the client's side and on the server's.
func TestFlush_WritesDirectlyWhenTheWriterIsIdle(t *testing.T) {
	cfg, _ := testConfig(t)
	s := newServer(t, cfg)
	c := dial(t, cfg, s)
	waitClients(t, s, 1)
	cn := c.cur.Load()
	s.refresh()
	sc := s.conns[0]
	const frames = 200
	var fromClient, fromServer recorder
	for i := 0; i < frames; i++ {
		f := numbered(i, 100)
		before := cn.written.Load()
		if err := c.Send(f); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := cn.written.Load() - before; got != uint64(4+len(f)) {
			t.Fatalf("client frame %d: %d bytes written when Flush returned, want %d", i, got, 4+len(f))
		}
		before = sc.written.Load()
		if err := s.Publish(f); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := sc.written.Load() - before; got != uint64(4+len(f)) {
			t.Fatalf("server frame %d: %d bytes written when Flush returned, want %d", i, got, 4+len(f))
		}
	}
	eventually(t, "server receives all", s, fromClient.handle, func() bool { return len(fromClient.frames) == frames })
	eventually(t, "client receives all", c, fromServer.handle, func() bool { return len(fromServer.frames) == frames })
	for i := 0; i < frames; i++ {
		if !bytes.Equal(fromClient.frames[i], numbered(i, 100)) || !bytes.Equal(fromServer.frames[i], numbered(i, 100)) {
			t.Fatalf("frame %d arrived changed or out of order", i)
		}
	}
}
