// Package vfs is the small file-system interface under replayer.Store
// (the shape of pebble's vfs, reduced to what the store calls), so that
// the store runs on the real disk, in memory, or behind an error
// injector, with the same code.
//
// Main types:
//
//   - FS: create, open, remove and list files, make and sync directories.
//     Names are paths as the os package takes them.
//   - File: positioned reads and writes (ReadAt, WriteAt), Sync,
//     Truncate, Stat, Close: what a segment file needs.
//   - Default: FS over package os; what the store uses when its Config
//     names none.
//   - MemFS: an in-memory FS that remembers, per file and per directory,
//     what was last made durable (File.Sync, and Sync of the directory
//     for its entries). CrashClone returns the FS a power loss would
//     leave: every unsynced write and every unsynced create or remove
//     undone. The simulator and the store tests run the store on it.
//   - errorfs (subpackage): wraps any FS and fails chosen calls (ENOSPC
//     on a write, EIO on an fsync, a short write), by operation and
//     count or at random with a seed.
//
// Concurrency: Default is as safe as package os. A MemFS, its Files and
// its clones are safe for concurrent use (one mutex per MemFS): a
// Store's goroutine writes while Readers read on theirs.
package vfs
