// Package errorfs wraps a vfs.FS and makes chosen calls fail, so that
// tests and the simulator see what a full disk (ENOSPC), a failing fsync
// (EIO) or a short write does to the code above.
//
// Rules pick calls by operation (Op), by a substring of the file's name,
// and by count (let After matching calls through, then fail Times of
// them), or at random with a probability drawn from the FS's seeded
// source, so that a run is reproduced by its seed. An injected error is a
// *fs.PathError naming the operation and the file, wrapping the rule's
// Err: errors.Is(err, syscall.ENOSPC) holds. A failed call does nothing
// underneath (a short write writes its first half), so a failed Sync
// leaves a vfs.MemFS's bytes unsynced, and its CrashClone drops them.
//
// An FS and its Files are safe for concurrent use.
package errorfs
