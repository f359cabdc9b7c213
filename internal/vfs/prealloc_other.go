//go:build !linux

package vfs

func preallocateOS(File, int64) error { return ErrNoPreallocate }
