package replayer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockName is the lock file of a replayer's directory.
const LockName = "LOCK"

// ErrLocked: another process holds the directory's lock (a second
// replayer on one directory appended to the same segment).
var ErrLocked = errors.New("replayer: directory in use")

// DirLock is the exclusive lock on a store directory: an flock(2) on
// dir/LOCK, which holds the holder's pid for the next one's error. The
// kernel drops it when the process dies, so a crash leaves no stale lock.
type DirLock struct{ f *os.File }

// LockDir takes dir's lock (creating dir and the file if missing), or
// returns ErrLocked naming the holder's pid.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replayer: %w", err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("replayer: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if _, perr := strconv.Atoi(holder); perr != nil {
			holder = "unknown"
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by pid %s (%s): one replayer per directory; stop it, or give this one another --dir", ErrLocked, dir, holder, path)
		}
		return nil, fmt.Errorf("replayer: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock (the file stays, empty of meaning).
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}
