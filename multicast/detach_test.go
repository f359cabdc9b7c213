package multicast

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// runtimePolled lists the fds registered in every epoll set of this
// process except skip (from /proc/self/fdinfo: one "tfd: N" line each).
func runtimePolled(t *testing.T, skip map[int]bool) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	polled := map[int]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || skip[fd] {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "tfd:" {
				if n, err := strconv.Atoi(f[1]); err == nil {
					polled[n] = true
				}
			}
		}
	}
	return polled
}

// The endpoints' sockets are out of the Go runtime's epoll set (only in
// their own poller's): every datagram and send completion on a socket
// there woke the runtime's netpoll thread, twice per round trip of a node.
func TestSockets_NotInTheRuntimePoller(t *testing.T) {
	srv, cls := session(t, testConfig(t), 1)
	own := map[int]bool{srv.poller.Fd(): true, cls[0].poller.Fd(): true}
	polled := runtimePolled(t, own)
	for _, e := range []*endpoint{&srv.endpoint, &cls[0].endpoint} {
		for _, s := range e.sockets {
			if polled[s.fd] {
				t.Errorf("%s socket fd %d is in the runtime's epoll set", e.role, s.fd)
			}
		}
	}
	// The endpoints still carry frames both ways.
	if err := cls[0].Send([]byte("command")); err != nil {
		t.Fatal(err)
	}
	if err := cls[0].Flush(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for i := 0; i < 100 && got == 0; i++ {
		got, _ = srv.Poll(func([]byte, transport.Peer) {}, 10*time.Millisecond)
	}
	if got == 0 {
		t.Fatal("the server received no command")
	}
	if err := srv.Publish([]byte("stream")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	got = 0
	for i := 0; i < 100 && got == 0; i++ {
		got, _ = cls[0].Poll(func([]byte, transport.Peer) {}, 10*time.Millisecond)
	}
	if got == 0 {
		t.Fatal("the client received no stream frame")
	}
}
