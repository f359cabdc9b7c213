package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
)

// TestReplayer_RewindPortInUseFailsBeforeReady: a --rewind-addr that
// cannot be bound ends the replayer with an error naming it, and it never
// printed "ready" (it said ready, then failed to bind).
func TestReplayer_RewindPortInUseFailsBeforeReady(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addrs, err := freeport.Addrs(1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = out
	defer func() { os.Stdout = saved }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	runErr := newApp().RunContext(ctx, []string{"seqd", "replayer", "--dir", t.TempDir(), "--nak-addr", addrs[0],
		"--rewind-addr", busy.Addr().String(), "--udp.interface", "lo",
		"--udp.stream-group", "239.77.19.1:19180", "--udp.command-group", "239.77.19.2:19181", "--log-level", "error"})
	os.Stdout = saved
	printed, _ := os.ReadFile(out.Name())
	if runErr == nil || !strings.Contains(runErr.Error(), "rewind-addr "+busy.Addr().String()) {
		t.Errorf("error %v, want one naming rewind-addr %s", runErr, busy.Addr())
	}
	if strings.Contains(string(printed), "ready") {
		t.Errorf("printed ready before failing:\n%s", printed)
	}
}
