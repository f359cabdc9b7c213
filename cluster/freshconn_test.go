package cluster

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFreshConn_PeerClosedWhilePooled: a pooled connection whose peer
// closed it (a restarted member) carries the next request on a new
// connection instead of failing it; a live one is reused.
func TestFreshConn_PeerClosedWhilePooled(t *testing.T) {
	for _, name := range []string{"tcp", "partition"} {
		t.Run(name, func(t *testing.T) {
			var server raft.StreamLayer
			var err error
			if name == "tcp" {
				server, err = newTCPLayer("127.0.0.1:0")
			} else {
				server, err = NewPartitionLayer("127.0.0.1:0")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			var accepts atomic.Int32
			conns := make(chan net.Conn, 4)
			go func() {
				for {
					c, err := server.Accept()
					if err != nil {
						return
					}
					accepts.Add(1)
					conns <- c
					go func() { _, _ = io.Copy(c, c) }() // an answer per request
				}
			}()
			var client raft.StreamLayer
			if name == "tcp" {
				client, err = newTCPLayer("127.0.0.1:0")
			} else {
				client, err = NewPartitionLayer("127.0.0.1:0")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			l := &watchLayer{StreamLayer: client}
			c, err := l.Dial(raft.ServerAddress(server.Addr().String()), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			request := func(b byte) error {
				if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
					return err
				}
				if _, err := c.Write([]byte{b}); err != nil {
					return err
				}
				got := make([]byte, 1)
				if _, err := io.ReadFull(c, got); err != nil {
					return err
				}
				if got[0] != b {
					t.Errorf("answer %d, want %d", got[0], b)
				}
				return nil
			}
			for i := range 2 {
				if err := request(byte(i)); err != nil {
					t.Fatalf("request %d on a live connection: %v", i, err)
				}
			}
			if n := accepts.Load(); n != 1 {
				t.Fatalf("%d connections for two requests, want 1", n)
			}
			// The peer closes its end while the connection is idle.
			(<-conns).Close()
			fc := c.(*freshConn)
			for deadline := time.Now().Add(10 * time.Second); !peerGone(fc.conn()); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the peer's close never arrived")
				}
			}
			if err := request(7); err != nil {
				t.Fatalf("request after the peer closed: %v", err)
			}
			if n := accepts.Load(); n != 2 {
				t.Errorf("%d connections, want 2 (one dialed afresh)", n)
			}
		})
	}
}
