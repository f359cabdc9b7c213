package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

func preallocateOS(f File, size int64) error {
	of, ok := f.(*os.File)
	if !ok {
		return ErrNoPreallocate
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, 0, size)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
