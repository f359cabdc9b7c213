package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

// TestLink_TLS: with Config.TLS the TCP channels (the stream's rewinds
// and the control connections that carry the far site's commands) run
// over mutual TLS between bridge-* certificates; a receiving end that is
// plain, holds a certificate of another CA, or one of the CA not named
// bridge-*, gets nothing of the stream and the sending end says why.
func TestLink_TLS(t *testing.T) {
	ca := tlstest.New(t, "sites")
	t.Run("bridge certificates", func(t *testing.T) {
		commandsBack(t, false, ca.Identity(t, "bridge-A"), ca.Identity(t, "bridge-B"))
	})
	for _, c := range []struct {
		name string
		id   *tlsconf.Identity
		want string // in the sending end's log
	}{
		{"plain", nil, "tls handshake refused"},
		{"another CA", tlstest.New(t, "rogue").Identity(t, "bridge-B"), "tls handshake refused"},
		{"not a bridge", ca.Identity(t, "node-B"), "is not one of bridge-*"},
	} {
		t.Run(c.name, func(t *testing.T) { refusedLink(t, ca.Identity(t, "bridge-A"), c.id, c.want) })
	}
}

// lockedBuffer is a log sink safe for the ends' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func refusedLink(t *testing.T, sendTLS, recvTLS *tlsconf.Identity, want string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seqAddr := tcpSequencer(t, ctx, 85)
	tcpAddr := freeAddr(t)
	var log lockedBuffer
	s := startSend(t, ctx, seqAddr, func(c *Config) {
		c.TCP = []string{tcpAddr}
		c.TLS = sendTLS
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	sendNode(t, ctx, seqAddr, "ORIGIN", 20)
	rc := receiveConfig(t, "B")
	rc.TCP, rc.UDP, rc.TLS = []string{tcpAddr}, nil, recvTLS
	r, err := NewReceiveEnd(rc, tcpSite(t))
	if err != nil {
		t.Fatal(err)
	}
	done := runEnd(t, ctx, r.Run)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), want) && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the receiving end stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(log.String(), want) {
		t.Fatalf("the sending end did not log %q:\n%s", want, log.String())
	}
	if st := s.Stats(); st.TLSRefused == 0 {
		t.Fatalf("the sending end logged a refusal but counted none: %+v", st)
	}
	time.Sleep(500 * time.Millisecond) // a channel that got through would deliver by now
	if st := r.Stats(); st.Delivered != 0 || st.NextSeq > 1 || st.MaxSeq != 0 {
		t.Fatalf("a refused receiving end got the stream: delivered %d, next seq %d, max seq %d", st.Delivered, st.NextSeq, st.MaxSeq)
	}
}
