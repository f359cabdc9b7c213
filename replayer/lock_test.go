package replayer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/seqd/seqd/transport/mem"
)

// TestLockDir_SecondHolderRefusedWithPid: a second lock on a directory
// fails with ErrLocked naming the holder's pid (two replayers once
// appended to one segment); after Unlock it is free again.
func TestLockDir_SecondHolderRefusedWithPid(t *testing.T) {
	dir := t.TempDir()
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l2.Unlock()
}

// TestService_MarksItsDirectoryStable: a Service's directory says that
// every record in it was stable when stored (replay --stable-only reads
// a replayer's archive to its end by it).
func TestService_MarksItsDirectoryStable(t *testing.T) {
	follow, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	naks, err := mem.NewNetwork(mem.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultServiceConfig()
	cfg.Dir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if AllStable(cfg.Dir) {
		t.Fatal("an empty directory is marked")
	}
	s, err := NewService(cfg, follow.Client(), naks.Server())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.Run(ctx)
	if !AllStable(cfg.Dir) {
		t.Fatalf("%s has no %s after a Service ran on it", cfg.Dir, StableName)
	}
}
