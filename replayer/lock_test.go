package replayer

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
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
